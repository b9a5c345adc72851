from linked_list import DoublyLinkedList


def test_append_and_prepend():
    lst = DoublyLinkedList()
    lst.append(2)
    lst.prepend(1)
    assert lst.to_list() == [1, 2] and len(lst) == 2


def test_delete():
    lst = DoublyLinkedList.from_list([1, 2, 3])
    assert lst.delete(2) is True
    assert lst.delete(7) is False
    assert lst.to_list() == [1, 3]


def test_find():
    lst = DoublyLinkedList.from_list(["a", "b"])
    assert lst.find("b") is lst.tail
    assert lst.find("z") is None


def test_reverse():
    lst = DoublyLinkedList.from_list([1, 2, 3])
    lst.reverse()
    assert lst.to_list() == [3, 2, 1] and lst.head.value == 3 and lst.tail.prev.value == 2


def test_clear():
    lst = DoublyLinkedList.from_list([1, 2])
    lst.clear()
    assert lst.to_list() == [] and lst.head is None and len(lst) == 0
