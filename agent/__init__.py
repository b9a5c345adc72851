"""spec-agent: a coding agent for a local llama.cpp / BeeLlama server with speculative decoding."""

__version__ = "0.1.0"
