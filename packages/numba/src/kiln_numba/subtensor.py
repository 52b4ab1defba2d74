"""Numba implementations: subtensor family (being written)."""
