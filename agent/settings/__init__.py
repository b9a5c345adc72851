"""The ground: the settings (user < project < env < flags), which folders are trusted, and where state lives."""

# Fresh starts of a stuck line by default. Each new line samples warmer with a seed of its own, and a
# small model's right answer is often a few lines away: on an H100, 22 path-less planted tasks side by
# side (docs/benchmarks.md), 6 solved 10 and 2 solved 5, three of the 10 on the fifth or sixth start.
FRESH_STARTS = 6
