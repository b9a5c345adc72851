"""A tiny command-line to-do list that keeps its items in todo.json."""

import argparse
import json
from pathlib import Path

STORE = Path("todo.json")


def load():
    return json.loads(STORE.read_text()) if STORE.exists() else []


def save(items):
    STORE.write_text(json.dumps(items, indent=2))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("add", help="add an item").add_argument("text")
    commands.add_parser("list", help="show the items with their numbers")
    commands.add_parser("done", help="mark an item as done").add_argument("number", type=int)
    args = parser.parse_args(argv)
    items = load()
    if args.command == "add":
        items.append({"text": args.text, "done": False})
    elif args.command == "done":
        items[args.number - 1]["done"] = True
    else:
        for number, item in enumerate(items, 1):
            print(f"{number}. [{'x' if item['done'] else ' '}] {item['text']}")
    save(items)


if __name__ == "__main__":
    main()
