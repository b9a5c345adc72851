"""Notes kept in a JSON file: a list of objects, one per note."""

import json
from dataclasses import dataclass


@dataclass
class Note:
    title: str
    body: str


def save_notes(notes, path):
    rows = [{"title": note.title, "body": note.body} for note in notes]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=2)


def load_notes(path):
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)
    return [Note(row["title"], row["body"]) for row in rows]
