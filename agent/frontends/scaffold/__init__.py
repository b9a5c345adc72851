"""`agent new DIR "what to build"`: a project from nothing.

It renders a template into a new folder (the skeleton: build file, tests, lint config, AGENTS.md), makes
it a git repository with one commit, then gives the agent the description with a scaffolding prompt and
the template's check, through `agent run`'s own code path (agent/session/task_run.py), so the check loop, the
--json events, the exit codes and the session with its `--resume` are the same. When the check passes,
the agent's work becomes the second commit.

The modules, in the order the command uses them: templates (finding and reading them), render (the
skeleton in memory), skeleton (writing it), git (its commits), task (the guarded check and the task
file), report (what is shown), command (`cmd_new`, the CLI's handler).
"""
