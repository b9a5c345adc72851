"""The core: the loop, the model client, the context window, the check loop and the guards; the
workbench (a workspace's repository, checkpoints and changes), the task message, and build_agent, which
wires them for one workspace. Nothing here knows a terminal or a front end."""
