"""The `blocks` protocol: its prompt, the parser of edit blocks, and the protocol itself."""
