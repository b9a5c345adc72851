"""The measuring commands, in one folder.

`agent bench`: bench_command (the entry point, progress, the table), bench_prompts (the seed's prompts
through the agent's client, `BenchResult`, `Eta`), bench_results (spreads, speedups, identity, the
files), bench_charts (matplotlib), answers (code checks, text comparison), memory (RSS and VRAM),
bench_record (the command line and the load), bench_modes (`--conversation` through conversation,
`--tasks` through suite, the task suite).

`agent server tune`: tune_command (the entry point: servers, measuring, the tuned profile written) over
tune_setups (the setups to try, their results, the budget, the tuned profile's text).
"""
