"""The measuring commands: `agent bench` (and its charts and memory figures), the task suite, `agent server
tune`."""
