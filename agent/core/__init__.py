"""The core: the loop, the model client, the context window, the check loop and the guards; the
workbench (a workspace's repository, checkpoints and changes), the task message, and the interface an
action protocol implements (`protocol`). It names no protocol: the loop is handed one ready-built by the
session layer (agent/session/build_agent.py). Nothing here knows a terminal or a front end."""
