"""Notes kept in a JSON file: a list of objects, one per note."""

import json
from dataclasses import dataclass, field


@dataclass
class Note:
    title: str
    body: str
    tags: list[str] = field(default_factory=list)


def save_notes(notes, path):
    rows = [{"title": note.title, "body": note.body, "tags": note.tags} for note in notes]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=2)


def load_notes(path):
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)
    # Files written before notes had tags have no "tags" key.
    return [Note(row["title"], row["body"], list(row.get("tags", []))) for row in rows]
