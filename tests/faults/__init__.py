"""Fault injection and bad input: each test breaks one thing on purpose (issue 13)."""
