"""Count the lines of a text file."""

import argparse


def count_lines(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Count the lines of a text file.")
    parser.add_argument("path", help="the file to count")
    args = parser.parse_args(argv)
    print(count_lines(args.path))


if __name__ == "__main__":
    main()
