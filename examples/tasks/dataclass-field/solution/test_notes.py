from notes import Note, load_notes, save_notes


def test_save_and_load_round_trip(tmp_path):
    path = tmp_path / "notes.json"
    save_notes([Note("a", "b"), Note("c", "d")], path)
    assert load_notes(path) == [Note("a", "b"), Note("c", "d")]


def test_a_file_without_tags_loads_with_empty_tags():
    notes = load_notes("notes.json")
    assert [note.tags for note in notes] == [[], []]
