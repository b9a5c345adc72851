"""The session layer: a profile to a live endpoint (`connect`), the agent's assembly with its action
protocol built by name (`build_agent`), the one way a session opens (`live.open_session`), a task run to
its check (`task_run`), and the task-file format (`taskfile`). Front ends reach the core and the
protocols only through it (`parts`, `actions`)."""
