from __future__ import annotations

from dataclasses import dataclass


@dataclass(eq=False)
class Node:
    value: object
    prev: Node | None = None
    next: Node | None = None


class DoublyLinkedList:
    def __init__(self):
        self.head = None
        self.tail = None
        self.size = 0

    def __len__(self):
        return self.size

    def append(self, value):
        node = Node(value, prev=self.tail)
        if self.tail is None:
            self.head = node
        else:
            self.tail.next = node
        self.tail = node
        self.size += 1

    def prepend(self, value):
        node = Node(value, next=self.head)
        if self.head is None:
            self.tail = node
        else:
            self.head.prev = node
        self.head = node
        self.size += 1

    def find(self, value):
        node = self.head
        while node is not None and node.value != value:
            node = node.next
        return node

    def delete(self, value):
        node = self.find(value)
        if node is None:
            return False
        if node.prev is None:
            self.head = node.next
        else:
            node.prev.next = node.next
        if node.next is None:
            self.tail = node.prev
        else:
            node.next.prev = node.prev
        self.size -= 1
        return True

    def reverse(self):
        node = self.head
        while node is not None:
            node.prev, node.next = node.next, node.prev
            node = node.prev
        self.head, self.tail = self.tail, self.head

    def to_list(self):
        values, node = [], self.head
        while node is not None:
            values.append(node.value)
            node = node.next
        return values

    @classmethod
    def from_list(cls, values):
        lst = cls()
        for value in values:
            lst.append(value)
        return lst

    def clear(self):
        self.head = self.tail = None
        self.size = 0
