"""Durations written like 45s, 10m, 2h or 1h30m."""

UNITS = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    """The number of seconds in `text`, e.g. "1h30m" -> 5400. Raises ValueError for bad text."""
    text = text.strip().lower()
    if not text:
        raise ValueError("empty duration")
    total = 0
    number = ""
    for char in text:
        if char.isdigit():
            number += char
        elif char in UNITS:
            if not number:
                raise ValueError(f"no number before {char!r} in {text!r}")
            total = int(number) * UNITS[char]
            number = ""
        else:
            raise ValueError(f"unexpected {char!r} in {text!r}")
    if number:
        raise ValueError(f"{text!r} ends without a unit (h, m or s)")
    return total
