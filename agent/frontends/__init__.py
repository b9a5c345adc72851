"""The front ends: each opens its session through `agent.session.live.open_session`, turns events into its
own output, and answers approvals."""
