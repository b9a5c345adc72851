"""The plain commands (`agent server ...`, `agent doctor`, ...): front ends over the core."""
