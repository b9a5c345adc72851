"""What a llama-server binary accepts, read from its `--help`, and the translation of a profile's flags.

Upstream llama.cpp, BeeLlama v0.1/v0.2 and BeeLlama v0.4 spell some flags differently (FACTS.md), and a
flag one of them lacks makes the server exit at once. So before launching we read the binary's help
(cached per binary), rename what has a known equivalent, and refuse the rest by name.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import ServerError

# Flags with the same meaning under different names. Each group is tried in order: the first name
# the binary accepts replaces the others.
FLAG_SYNONYMS: list[tuple[str, ...]] = [
    ("--spec-draft-model", "-md", "--model-draft"),
    ("--spec-draft-ngl", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"),
    ("--spec-draft-n-max", "--draft-max", "--draft", "--draft-n"),
    ("--spec-draft-n-min", "--draft-min", "--draft-n-min"),
    ("--spec-draft-p-min", "--draft-p-min"),
    ("--spec-draft-ctx-size", "-cd", "--ctx-size-draft"),
]
# --spec-type values that name the same method: BeeLlama v0.1/v0.2 say `dflash`, the others `draft-dflash`.
SPEC_TYPE_SYNONYMS: list[tuple[str, ...]] = [("draft-dflash", "dflash")]

_NUMBER = re.compile(r"^-\d")
_FLAG_TOKEN = re.compile(r"^--?[A-Za-z][\w-]*$")


@dataclass(frozen=True)
class FlagSpec:
    names: tuple[str, ...]
    takes_value: bool
    removed: bool = False
    help: str = ""


@dataclass
class BinaryCapabilities:
    """The flags and speculative types one binary accepts, and the dialect they add up to."""

    path: Path
    flags: dict[str, FlagSpec]
    spec_types: tuple[str, ...]
    dialect: str
    help_text: str = field(repr=False, default="")

    def accepts(self, flag: str) -> bool:
        spec = self.flags.get(flag)
        return spec is not None and not spec.removed

    def label(self) -> str:
        return f"{self.path} ({self.dialect})"


def parse_help(text: str) -> tuple[dict[str, FlagSpec], tuple[str, ...]]:
    """Flags and --spec-type values from llama-server's help, which lists one option per entry:

        -c,    --ctx-size N                     size of the prompt context ...
                                                (env: LLAMA_ARG_CTX_SIZE)
    Names and value come first; the description follows after a run of spaces or on the next lines.
    """
    entries: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("-") and not line.startswith("-----"):
            head, desc = _split_entry(line)
            entries.append((head, [desc]))
        elif entries and line.startswith(" "):
            entries[-1][1].append(line.strip())
    flags: dict[str, FlagSpec] = {}
    spec_types: tuple[str, ...] = ()
    for head, desc_lines in entries:
        tokens = head.replace(",", " ").split()
        names = tuple(t for t in tokens if _FLAG_TOKEN.match(t))
        values = [t for t in tokens if not _FLAG_TOKEN.match(t)]
        description = " ".join(d for d in desc_lines if d)
        spec = FlagSpec(
            names=names,
            # "[on|off|auto]" is optional in llama.cpp's parser only for a few flags; it still takes it.
            takes_value=bool(values),
            removed="argument has been removed" in description,
            help=description,
        )
        for name in names:
            flags[name] = spec
        if "--spec-type" in names and values:
            spec_types = tuple(v for v in re.split(r"[,|\[\]\s]+", " ".join(values)) if v)
    return flags, spec_types


def _split_entry(line: str) -> tuple[str, str]:
    # The names end at the first run of two or more spaces that does not follow a comma
    # ("-c,    --ctx-size N" keeps going after "-c,").
    parts = re.split(r"(?<![,\s])\s{2,}", line.rstrip(), maxsplit=1)
    return parts[0], parts[1] if len(parts) > 1 else ""


def detect_dialect(help_text: str, spec_types: tuple[str, ...]) -> str:
    if "dflash" in spec_types:
        return "beellama-0.1"
    if "turbo3" in help_text or "turbo4" in help_text:
        return "beellama-0.4"
    return "upstream"


def capabilities_from_help(path: Path, help_text: str) -> BinaryCapabilities:
    flags, spec_types = parse_help(help_text)
    if "--port" not in flags or "--model" not in flags:
        raise ServerError(
            f"{path} does not look like llama-server",
            "Its --help lists no --model or --port option.",
            "Point the profile's `binary` (or LLAMA_SERVER_BIN) at a llama-server executable.",
        )
    return BinaryCapabilities(path, flags, spec_types, detect_dialect(help_text, spec_types), help_text)


def read_capabilities(binary: Path, cache_dir: Path) -> BinaryCapabilities:
    """Run `binary --help` once per binary (keyed by path, size and mtime) and parse it."""
    stat = binary.stat()
    key = hashlib.sha256(f"{binary.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    cached = cache_dir / "help" / f"{key}.txt"
    if cached.is_file():
        return capabilities_from_help(binary, cached.read_text(encoding="utf-8"))
    try:
        result = subprocess.run(
            [str(binary), "--help"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerError(f"could not run {binary} --help", str(exc)) from exc
    text = result.stdout if "--port" in result.stdout else result.stdout + result.stderr
    caps = capabilities_from_help(binary, text)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(text, encoding="utf-8")
    return caps


@dataclass
class Translation:
    argv: list[str]
    notes: list[str]


def translate_args(argv: list[str], caps: BinaryCapabilities, profile_name: str) -> Translation:
    """Rename flags and --spec-type values the binary spells differently; refuse what it lacks."""
    out: list[str] = []
    notes: list[str] = []
    refused: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not _FLAG_TOKEN.match(token) or _NUMBER.match(token):
            out.append(token)
            continue
        flag = token
        if not caps.accepts(flag):
            renamed = _synonym(flag, caps)
            if renamed:
                notes.append(f"{flag} → {renamed}")
                flag = renamed
            else:
                refused.append(_refusal(flag, caps))
        spec = caps.flags.get(flag)
        takes_value = spec.takes_value if spec else (i < len(argv) and not _FLAG_TOKEN.match(argv[i]))
        out.append(flag)
        if takes_value and i < len(argv):
            value = argv[i]
            i += 1
            if flag == "--spec-type":
                value, value_notes, value_refused = _translate_spec_types(value, caps)
                notes += value_notes
                refused += value_refused
            out.append(value)
    if refused:
        raise ServerError(
            f"profile '{profile_name}' uses what {caps.path} does not support",
            "\n".join(refused),
            f"That binary speaks the {caps.dialect} dialect. Remove or change those flags in the profile, "
            "or point it at a binary that has them (BeeLlama for DFlash: set LLAMA_SERVER_BIN).",
        )
    return Translation(out, notes)


def _synonym(flag: str, caps: BinaryCapabilities) -> str | None:
    for group in FLAG_SYNONYMS:
        if flag in group:
            return next((name for name in group if caps.accepts(name)), None)
    return None


def _refusal(flag: str, caps: BinaryCapabilities) -> str:
    spec = caps.flags.get(flag)
    if spec and spec.removed:
        return f"  {flag}: removed in this binary ({spec.help})"
    return f"  {flag}: not an option of this binary"


def _translate_spec_types(value: str, caps: BinaryCapabilities) -> tuple[str, list[str], list[str]]:
    if not caps.spec_types:
        return value, [], []
    types, notes, refused = [], [], []
    for name in value.split(","):
        if name in caps.spec_types:
            types.append(name)
            continue
        group = next((g for g in SPEC_TYPE_SYNONYMS if name in g), ())
        other = next((g for g in group if g in caps.spec_types), None)
        if other:
            types.append(other)
            notes.append(f"--spec-type {name} → {other}")
        else:
            refused.append(
                f"  --spec-type {name}: unknown speculative type (it knows: {', '.join(caps.spec_types)})"
            )
    return ",".join(types), notes, refused
