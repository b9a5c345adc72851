"""The core: the loop, the model client, the context window, the check loop and the guards, and the
workbench that wires them for one workspace. Nothing here knows a terminal or a front end."""
