"""The TUI's widgets, one per file; they receive messages and know nothing of the loop."""
