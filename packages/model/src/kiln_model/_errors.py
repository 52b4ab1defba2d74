"""Errors of the model layer."""

from kiln_graph import KilnValueError


class ModelError(KilnValueError):
    """A model is used wrongly (no model in context, a duplicate name, an unknown dim...)."""
