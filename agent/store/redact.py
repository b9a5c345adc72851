"""Secrets out of everything the agent writes: transcripts, telemetry, `--json` events, progress lines.

Two kinds of secret are replaced by `[REDACTED]` (`[REDACTED:kind]` for a recognised token shape):
exact values registered when a run starts (the API key the client uses, the values of MCP servers'
`env` and `headers`, environment variables named like `*_KEY`, `*_TOKEN`, `*_SECRET`, `*PASSWORD*`),
and common token shapes (OpenAI, Anthropic, GitHub, AWS, Slack, Hugging Face, Google, JWTs, Bearer and
Authorization headers, PEM private keys, `password=...` / `token: ...` assignments).

Only what is written out is redacted. The model still sees real tool outputs in memory, and the TUI
shows them on the user's own screen; a session resumed from its transcript sees the redacted text.

Speed matters, as transcripts are written event by event: a pattern of many alternatives runs in
Python's regex engine at every position of the text (~370 ms per MB). So each shape starts with a
literal, which the engine finds with a C-speed search, and runs only when a plain substring test says
it can occur at all: ~14 ms per MB of prose, ~31 ms of Python source (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

REDACTED = "[REDACTED]"

# Exact values shorter than this would redact ordinary words and numbers ("true", "8080") wherever
# they appear; environment variables are only guessed at by name, so they need a longer value.
MIN_EXACT = 6
MIN_ENV = 8
_SECRET_ENV_NAME = re.compile(r"(?:_KEY|_TOKEN|_SECRET)$|PASSWORD", re.I)


def _word(literal: str, rest: str) -> str:
    """`literal` at the start of a word, then `rest`. The look-behind comes after the literal: a
    leading \\b would keep the engine from searching for the literal at C speed."""
    escaped = re.escape(literal)
    return f"{escaped}(?<!\\w{escaped}){rest}"


@dataclass(frozen=True)
class Shape:
    kind: str
    hints: tuple[str, ...]  # lowercase; one of them occurs in the lowered text wherever the shape can
    pattern: re.Pattern[str]  # a secret, after an optional (?P<keep>...) that stays (a key, "Bearer ")
    lowered: bool = False  # matched in the lowered text: a case-insensitive key, still a literal

    @property
    def label(self) -> str:
        return REDACTED if self.lowered else f"[REDACTED:{self.kind}]"

    def apply(self, text: str) -> str:
        source = text.lower() if self.lowered else text
        if len(source) != len(text):  # a letter whose lower case is longer: positions would differ
            source, pattern = text, re.compile(self.pattern.pattern, re.I)
        else:
            pattern = self.pattern
        keeps = "keep" in pattern.groupindex
        parts, last = [], 0
        for match in pattern.finditer(source):
            parts += [text[last : match.end("keep") if keeps else match.start()], self.label]
            last = match.end()
        return "".join(parts) + text[last:] if parts else text


def _shape(kind: str, hints: tuple[str, ...], pattern: str, lowered: bool = False) -> Shape:
    return Shape(kind, hints, re.compile(pattern), lowered)


_TOKEN = r"[A-Za-z0-9_-]"
# In order: a PEM block may hold anything, and Anthropic keys are OpenAI-shaped too.
SHAPES = (
    _shape("pem", ("private key-----",),
           r"-----BEGIN[A-Z ]* PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]* PRIVATE KEY-----|\Z)"),
    _shape("anthropic", ("sk-ant-",), _word("sk-ant-", f"{_TOKEN}{{20,}}")),
    _shape("openai", ("sk-",), _word("sk-", f"(?:proj-|svcacct-|admin-)?{_TOKEN}{{20,}}")),
    _shape("github", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _word("gh", r"[pousr]_[A-Za-z0-9]{30,}")),
    _shape("github", ("github_pat_",), _word("github_pat_", r"[A-Za-z0-9_]{22,}")),
    _shape("aws", ("akia", "asia"), _word("A", r"(?:KIA|SIA)[0-9A-Z]{16}\b")),
    _shape("slack", ("xox",), _word("xox", r"[abprs]-[A-Za-z0-9-]{10,}")),
    _shape("huggingface", ("hf_",), _word("hf_", r"[A-Za-z0-9]{30,}")),
    _shape("google", ("aiza",), _word("AIza", f"{_TOKEN}{{35}}")),
    _shape("jwt", ("eyj",), _word("eyJ", r"[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+")),
    # These three look for their key in the lowered text ("Authorization", "BEARER", "Password").
    # "Authorization: Basic dXNl...", with or without a scheme word.
    _shape("auth", ("authorization",),
           r"(?P<keep>authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:\w+[ \t]+)?)[^\s\"',;]{8,}", lowered=True),
    # A bare "Bearer <token>"; a short word after "bearer" in prose ("the bearer of") is no token.
    _shape("bearer", ("bearer",), r"(?P<keep>bearer(?<!\wbearer)[ \t]+)[a-z0-9._~+/-]{16,}=*", lowered=True),
    # key = value, key: value, "key": "value" where the key ends in a secret word. The value stops
    # before quotes and brackets, and a call or an index (`token = get_token()`) is code, no secret.
    _shape("assignment", ("pass", "secret", "token", "key", "credential"),
           r"(?P<keep>(?:password|passwd|secret|token|api[_-]?key|_key|credentials?)(?![a-z0-9_])"
           r"[\"']?[ \t]*[:=][ \t]*[\"']?)[^\s\"'`,;()\[\]{}<>]{4,}+(?![(\[])", lowered=True),
)  # fmt: skip


class Redactor:
    """Registered exact values, then each token shape that can occur, in one C-speed scan apiece."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values: list[str] = []  # longest first, so a value holding another one goes whole
        self._exact: re.Pattern[str] | None = None
        self.add(*values)

    def add(self, *values: str | None, min_length: int = MIN_EXACT) -> None:
        new = {v for v in values if v and len(v) >= min_length} - set(self.values)
        if new:
            self.values = sorted([*self.values, *new], key=len, reverse=True)
            self._exact = re.compile("|".join(map(re.escape, self.values)))

    def add_environment(self, environ: Mapping[str, str] | None = None) -> None:
        """Values of environment variables whose names say they are secrets."""
        environ = os.environ if environ is None else environ
        self.add(*(v for k, v in environ.items() if _SECRET_ENV_NAME.search(k)), min_length=MIN_ENV)

    def add_mcp(self, configs: Mapping[str, Any]) -> None:
        """The values of each MCP server's `env` and `headers` (a "Bearer X" header's X alone too),
        with `${VAR}`s expanded as the server will get them (as written when a variable is unset)."""
        for config in configs.values():
            with contextlib.suppress(AttributeError, ValueError):
                config = config.expanded()
            self.add(*(getattr(config, "env", None) or {}).values())
            for value in (getattr(config, "headers", None) or {}).values():
                self.add(value, *value.split()[-1:])

    def __call__(self, text: str) -> str:
        if self._exact is not None and any(v in text for v in self.values):
            text = self._exact.sub(REDACTED, text)
        lowered = text.lower()
        for shape in SHAPES:
            if any(hint in lowered for hint in shape.hints):
                text = shape.apply(text)
        return text

    def record(self, value: Any) -> Any:
        """A JSON-ready copy of `value` with every string redacted (dict keys are names: kept).
        Objects json.dumps would only write through `default=str` become redacted strings here."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {key: self.record(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.record(item) for item in value]
        if value is None or isinstance(value, bool | int | float):
            return value
        return self(str(value))


# The process's redactor, used wherever the agent writes: the environment from the start (an error
# may be written before a run is set up), the run's key and MCP values once `register_run` is called.
default = Redactor()
default.add_environment()


def register_run(api_key: str | None = None, mcp: Mapping[str, Any] | None = None) -> None:
    """Called where a run is set up, before its first event is written."""
    default.add(api_key)
    default.add_mcp(mcp or {})
    default.add_environment()


def redact(text: str) -> str:
    return default(text)


def redact_record(value: Any) -> Any:
    return default.record(value)
