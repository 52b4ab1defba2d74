"""The specialize phase (rewrites being written)."""
