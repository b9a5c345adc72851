from account import Account


def test_deposit_returns_the_new_balance():
    assert Account("ann", 10).deposit(5) == 15


def test_withdraw_returns_the_new_balance():
    assert Account("ann", 10).withdraw(2.5) == 7.5
