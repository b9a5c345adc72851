"""The action protocols: how a model's answer becomes tool calls. Each has its parser (and, for edit blocks,
its prompt) beside it; `actions` holds what they share and picks one."""
