"""Intervals of numbers as (start, end) tuples."""


def merge_intervals(intervals):
    """Merge overlapping intervals.

    `intervals` is a list of (start, end) tuples with start <= end, in any order.
    Return a new list of (start, end) tuples sorted by start, in which intervals
    that overlap or touch (one ends where the next starts) are merged into one.
    The input list is not modified.

    >>> merge_intervals([(5, 7), (1, 3), (2, 4)])
    [(1, 4), (5, 7)]
    >>> merge_intervals([(1, 2), (2, 3)])
    [(1, 3)]
    >>> merge_intervals([])
    []
    """
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
