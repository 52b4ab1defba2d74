"""The inplace phase (rewrites being written)."""
