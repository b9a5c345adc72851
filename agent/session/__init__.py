"""The session core: a profile to a live endpoint (`connect`), the one way a session opens
(`live.open_session`), a task run to its check (`task_run`), and the task-file format (`taskfile`)."""
