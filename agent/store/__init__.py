"""The ground: what the agent keeps on disk: transcripts, telemetry, locks, measurements, and the redaction
that runs on all of it."""
