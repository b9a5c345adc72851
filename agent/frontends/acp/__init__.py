"""`agent acp`: the agent as an ACP (Agent Client Protocol) agent on stdin/stdout (the command is `agent.cmd_acp`)."""
