import pytest
from stats import mean, median


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_median_of_an_odd_number_of_values():
    assert median([3, 1, 2]) == 2


def test_median_of_an_even_number_of_values():
    assert median([4, 1, 3, 2]) == 2.5


def test_median_of_one_value():
    assert median([7]) == 7


def test_empty_lists_are_refused():
    with pytest.raises(ValueError):
        median([])
