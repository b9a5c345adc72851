from intervals import merge_intervals


def test_no_intervals():
    assert merge_intervals([]) == []


def test_separate_intervals_are_sorted():
    assert merge_intervals([(5, 6), (1, 2)]) == [(1, 2), (5, 6)]


def test_overlapping_intervals_merge():
    assert merge_intervals([(1, 4), (2, 6)]) == [(1, 6)]


def test_touching_intervals_merge():
    assert merge_intervals([(1, 2), (2, 3)]) == [(1, 3)]


def test_an_interval_inside_another():
    assert merge_intervals([(1, 10), (3, 4)]) == [(1, 10)]
