"""Orders: named items with prices."""

from pricing import calc_total, format_price


class Order:
    def __init__(self):
        self.items = []

    def add(self, name, price):
        self.items.append((name, price))

    def total(self, discount=0.0):
        return calc_total([price for _, price in self.items], discount)

    def receipt(self):
        lines = [f"{name}: {format_price(price)}" for name, price in self.items]
        return "\n".join([*lines, f"total: {format_price(self.total())}"])
