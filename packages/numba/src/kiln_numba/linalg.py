"""Numba implementations: linalg family (being written)."""
