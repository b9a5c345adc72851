"""The new project's git: the skeleton's commit, the agent's work as the second, and what the report
reads back (changes since the skeleton, the log, the count)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from agent.errors import AgentError, ConfigError

SUBJECT_LIMIT = 72


def require_git() -> None:
    if shutil.which("git") is None:
        raise ConfigError(
            "git is not installed (no `git` on PATH)",
            "`agent new` makes the project a git repository and commits the skeleton and the agent's work.",
            "Install git (e.g. `apt install git`), then run `agent new` again.",
        )


def _git_config(repo, key: str) -> str:
    from git import GitCommandError

    try:
        return repo.git.config("--get", key).strip()
    except GitCommandError:
        return ""


def ensure_identity(repo) -> str | None:
    """Commits need a name and an email. Without them (in git's config or its environment variables),
    set a project-local identity and say so."""
    env = os.environ
    has_name = bool(_git_config(repo, "user.name")) or bool(
        env.get("GIT_AUTHOR_NAME") and env.get("GIT_COMMITTER_NAME")
    )
    has_email = bool(_git_config(repo, "user.email")) or bool(
        env.get("EMAIL") or (env.get("GIT_AUTHOR_EMAIL") and env.get("GIT_COMMITTER_EMAIL"))
    )
    if has_name and has_email:
        return None
    try:
        import getpass

        login = re.sub(r"[^A-Za-z0-9._-]", "", getpass.getuser()) or "spec-agent"
    except (KeyError, OSError):
        login = "spec-agent"
    missing = []
    with repo.config_writer("repository") as config:
        if not has_name:
            config.set_value("user", "name", login)
            missing.append(f"user.name = {login}")
        if not has_email:
            config.set_value("user", "email", f"{login}@localhost")
            missing.append(f"user.email = {login}@localhost")
    return (
        f"git has no {' and no '.join(m.split(' =')[0] for m in missing)} set: committing with a project-local "
        f"identity ({', '.join(missing)} in {Path(repo.git_dir) / 'config'}); "
        "`git config --global user.name NAME` and `user.email EMAIL` set yours"
    )


def commit_skeleton(folder: Path, paths: list[str], subject: str, body: str) -> tuple[str, list[str]]:
    """`git init` (harmless in a repository already there) and a commit of exactly the files written:
    nothing the folder held before, and nothing staged before, goes into it."""
    import git

    from tools.git import without_hooks

    notes = []
    repo = without_hooks(git.Repo.init(folder))  # the agent's own commit runs no hook (issue #26)
    identity = ensure_identity(repo)
    if identity:
        notes.append(identity)
    if not paths:
        raise AgentError(f"nothing to commit in {folder}: every file of the template was already there")
    with repo.git.custom_environment(GIT_LITERAL_PATHSPECS="1"):
        repo.git.add("-f", "--", *paths)  # -f: the template's files belong in it, even if ignored
        try:
            repo.git.commit("-q", "--no-verify", "-m", subject, "-m", body, "--", *paths)
        except git.GitCommandError as exc:
            raise AgentError(
                f"git could not commit the skeleton in {folder}",
                (exc.stderr or str(exc)).strip()[-1500:],
                "The files are written; fix the cause (commit signing, say) and commit them yourself.",
            ) from exc
    return repo.head.commit.hexsha, notes


def commit_agent_work(folder: Path, since: str, subject: str) -> str | None:
    """The agent's files (changed since the skeleton) as one commit; the notice, None if it changed none."""
    from tools.git import Checkpoints, open_repo  # (lazy: GitPython, not for --list)

    repo = open_repo(folder)
    if repo is None:
        return None
    done = Checkpoints(repo).commit_changes(subject, since)
    return done.notice if done else None


def commit_subject(description: str) -> str:
    line = next((ln.strip() for ln in description.splitlines() if ln.strip()), "the project")
    if len(line) > SUBJECT_LIMIT:
        return line[: SUBJECT_LIMIT - 3].rsplit(" ", 1)[0].rstrip(",.;:") + "..."
    return line.rstrip(".")


def changes_since(folder: Path, sha: str) -> list[str]:
    """'A path' / 'M path' / 'D path' for what differs from `sha` in the working tree (untracked too)."""
    from tools.git import Checkpoints, open_repo  # (lazy: GitPython, not for --list)

    repo = open_repo(folder)
    if repo is None:
        return []
    out = Checkpoints(repo).diff_since(sha, "--name-status", "--no-renames")
    return [" ".join(line.split("\t", 1)) for line in out.splitlines() if line.strip()]


def branch_log(folder: Path, limit: int = 5) -> list[str]:
    from tools.git import open_repo  # (lazy: GitPython, not for --list)

    repo = open_repo(folder)
    if repo is None or not repo.head.is_valid():
        return []
    return repo.git.log(f"--max-count={limit}", "--format=%h %s").splitlines()


def commit_count(folder: Path) -> int:
    from tools.git import open_repo  # (lazy: GitPython, not for --list)

    repo = open_repo(folder)
    return int(repo.git.rev_list("--count", "HEAD")) if repo is not None and repo.head.is_valid() else 0
