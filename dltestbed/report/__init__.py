"""Statistics over stored runs, and their tables."""
