import csv
import sys


def totals_by_category(path):
    totals = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            totals[row["category"]] = totals.get(row["category"], 0.0) + float(row["amount"])
    return {category: round(total, 2) for category, total in totals.items()}


if __name__ == "__main__":
    for category, total in sorted(totals_by_category(sys.argv[1]).items()):
        print(f"{category}: {total:.2f}")
