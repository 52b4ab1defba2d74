"""Numba implementations: shape family (being written)."""
