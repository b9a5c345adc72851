"""Prices and discounts."""


def order_total(prices, discount=0.0):
    """The sum of `prices`, less `discount` given as a fraction (0.1 is 10 %), rounded to cents."""
    if not 0 <= discount < 1:
        raise ValueError(f"discount must be in [0, 1), not {discount}")
    return round(sum(prices) * (1 - discount), 2)


def format_price(amount):
    return f"{amount:.2f} EUR"
