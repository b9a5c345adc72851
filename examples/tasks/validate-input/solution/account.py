"""A bank account with a balance."""


def _checked(amount):
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        raise ValueError(f"the amount must be a number, not {amount!r}")
    if not amount > 0:
        raise ValueError(f"the amount must be greater than 0, not {amount}")
    return amount


class Account:
    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance

    def deposit(self, amount):
        self.balance += _checked(amount)
        return self.balance

    def withdraw(self, amount):
        if _checked(amount) > self.balance:
            raise ValueError(f"cannot withdraw {amount}: the balance is {self.balance}")
        self.balance -= amount
        return self.balance
