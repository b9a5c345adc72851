import pytest
from orders import Order
from pricing import calc_total


def test_calc_total_applies_the_discount():
    assert calc_total([10, 10], 0.25) == 15.0


def test_calc_total_refuses_a_full_discount():
    with pytest.raises(ValueError):
        calc_total([10], 1.0)


def test_order_receipt():
    order = Order()
    order.add("tea", 3.5)
    order.add("cake", 4)
    assert order.receipt() == "tea: 3.50 EUR\ncake: 4.00 EUR\ntotal: 7.50 EUR"
