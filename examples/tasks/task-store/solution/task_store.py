import json
from dataclasses import asdict, dataclass
from enum import Enum


class TaskStatus(Enum):
    TODO = "todo"
    IN_PROGRESS = "in_progress"
    DONE = "done"


@dataclass
class Task:
    id: int
    title: str
    description: str = ""
    status: TaskStatus = TaskStatus.TODO


class TaskStore:
    def __init__(self):
        self.tasks = {}
        self.next_id = 1

    def add_task(self, title, description=""):
        task = Task(self.next_id, title, description)
        self.tasks[task.id] = task
        self.next_id += 1
        return task

    def update_task(self, task_id, **changes):
        task = self.tasks[task_id]
        for name, value in changes.items():
            setattr(task, name, value)
        return task

    def delete_task(self, task_id):
        return self.tasks.pop(task_id, None) is not None

    def get_all_tasks(self):
        return [self.tasks[task_id] for task_id in sorted(self.tasks)]

    def search_tasks(self, text):
        text = text.lower()
        return [t for t in self.get_all_tasks() if text in t.title.lower() or text in t.description.lower()]

    def filter_by_status(self, status):
        return [t for t in self.get_all_tasks() if t.status is status]

    def export_to_json(self, path):
        rows = [{**asdict(t), "status": t.status.value} for t in self.get_all_tasks()]
        with open(path, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)
