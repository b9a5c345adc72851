"""The `tools` protocol: its prompt, the parser of calls written as text, and the protocol itself."""

NAME = "tools"  # what a profile, a task file or `--actions` calls it (read without importing the rest)
