"""The `tools` protocol: its prompt, the parser of calls written as text, and the protocol itself."""
