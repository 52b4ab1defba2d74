"""The stabilize phase (rewrites being written)."""
