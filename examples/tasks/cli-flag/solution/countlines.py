"""Count the lines of a text file."""

import argparse


def count_lines(path, skip_blank=False):
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if not (skip_blank and not line.strip()))


def main(argv=None):
    parser = argparse.ArgumentParser(description="Count the lines of a text file.")
    parser.add_argument("path", help="the file to count")
    parser.add_argument("--skip-blank", action="store_true", help="do not count blank lines")
    args = parser.parse_args(argv)
    print(count_lines(args.path, args.skip_blank))


if __name__ == "__main__":
    main()
