"""Numba implementations: reduce family (being written)."""
