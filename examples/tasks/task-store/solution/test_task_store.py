import json

import pytest
from task_store import TaskStatus, TaskStore


def test_add_task_numbers_tasks_from_1():
    store = TaskStore()
    assert [store.add_task("a").id, store.add_task("b").id] == [1, 2]


def test_update_task():
    store = TaskStore()
    store.add_task("a")
    assert store.update_task(1, status=TaskStatus.DONE).status is TaskStatus.DONE
    with pytest.raises(KeyError):
        store.update_task(5, title="x")


def test_delete_task():
    store = TaskStore()
    store.add_task("a")
    assert store.delete_task(1) is True
    assert store.delete_task(1) is False
    assert store.get_all_tasks() == []


def test_search_and_filter():
    store = TaskStore()
    store.add_task("Buy milk")
    store.add_task("Read", "a book about MILK")
    store.update_task(2, status=TaskStatus.IN_PROGRESS)
    assert [t.id for t in store.search_tasks("milk")] == [1, 2]
    assert [t.id for t in store.filter_by_status(TaskStatus.IN_PROGRESS)] == [2]


def test_export_to_json(tmp_path):
    store = TaskStore()
    store.add_task("a", "b")
    store.export_to_json(tmp_path / "tasks.json")
    data = json.loads((tmp_path / "tasks.json").read_text())
    assert data == [{"id": 1, "title": "a", "description": "b", "status": "todo"}]
