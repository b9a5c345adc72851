import pytest
from account import Account


def test_deposit_returns_the_new_balance():
    assert Account("ann", 10).deposit(5) == 15


def test_withdraw_returns_the_new_balance():
    assert Account("ann", 10).withdraw(2.5) == 7.5


@pytest.mark.parametrize("bad", [0, -1, "5", True, None])
def test_refused_amounts_leave_the_balance_alone(bad):
    account = Account("ann", 10)
    with pytest.raises(ValueError):
        account.deposit(bad)
    with pytest.raises(ValueError):
        account.withdraw(bad)
    assert account.balance == 10


def test_withdrawing_more_than_the_balance_is_refused():
    with pytest.raises(ValueError):
        Account("ann", 10).withdraw(11)
