"""Numba implementations: blockwise family (being written)."""
