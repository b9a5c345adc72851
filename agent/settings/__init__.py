"""The ground: the settings (user < project < env < flags), which folders are trusted, and where state lives."""
