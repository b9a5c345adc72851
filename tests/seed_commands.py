"""The user's two llama-server commands, copied from shared/seeds/ (the reference for the profiles)."""

BASELINE = """
./llama-server \
 -m "models/gemma-4-31B-it-Q4_K_S.gguf"  \
--host 0.0.0.0  \
 --port 8910 \
-np 1 \
-ngl all \
-b 2048 -ub 512 \
--ctx-size 32768  \
--cache-type-k q5_0 \
--cache-type-v q4_1 \
--flash-attn on \
--jinja \
--metrics \
--log-timestamps \
--log-prefix \
--reasoning off \
--temp 0.7 \
--top-k 64 \
--top-p 0.95 \
--min-p 0.0
"""

DFLASH = """
./llama-server \
-m "models/gemma-4-31B-it-Q4_K_S.gguf" \
--spec-draft-model "models/gemma4-31b-it-dflash-Q5_K_M.gguf" \
--spec-type dflash \
--spec-dflash-cross-ctx 1024 \
--host 0.0.0.0  \
 --port 8910 \
-np 1 \
--kv-unified \
-ngl all \
--spec-draft-ngl all \
-b 2048 -ub 512 \
--ctx-size 32768 \
--flash-attn on \
--cache-ram 0 \
--jinja \
--no-mmap \
--mlock \
--no-host \
--metrics \
--log-timestamps \
--log-prefix \
--reasoning off \
--temp 0.7 \
--top-k 64 \
--top-p 0.95 \
--min-p 0.0
"""


def options(argv: list[str]) -> list[tuple[str, str | None]]:
    """A command's options as sorted (flag, value) pairs: the same command whatever the flag order."""
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(argv):
        flag = argv[i]
        value = (
            argv[i + 1]
            if i + 1 < len(argv)
            and not argv[i + 1].startswith("--")
            and not (argv[i + 1].startswith("-") and argv[i + 1][1:2].isalpha())
            else None
        )
        pairs.append((flag, value))
        i += 2 if value is not None else 1
    return sorted(pairs, key=lambda p: (p[0], p[1] or ""))


def seed_argv(command: str) -> list[str]:
    import shlex

    return shlex.split(command.replace("\\\n", " "))[1:]
