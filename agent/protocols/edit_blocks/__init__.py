"""The `blocks` protocol: its prompt, the parser of edit blocks, and the protocol itself."""

NAME = "blocks"  # what a profile, a task file or `--actions` calls it (read without importing the rest)
