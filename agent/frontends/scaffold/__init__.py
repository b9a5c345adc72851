"""`agent new`: a project from nothing (the command is `command.cmd_new`)."""
