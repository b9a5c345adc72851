"""The interactive front end: `agent` opens a Textual session on the current folder."""
