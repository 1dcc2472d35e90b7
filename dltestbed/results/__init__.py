"""Run records and the local results store (the source of truth)."""
