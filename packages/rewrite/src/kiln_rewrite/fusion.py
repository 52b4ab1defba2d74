"""The fusion phase (rewrites being written)."""
