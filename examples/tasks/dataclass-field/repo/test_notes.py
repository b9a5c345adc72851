from notes import Note, load_notes, save_notes


def test_save_and_load_round_trip(tmp_path):
    path = tmp_path / "notes.json"
    save_notes([Note("a", "b"), Note("c", "d")], path)
    assert load_notes(path) == [Note("a", "b"), Note("c", "d")]
