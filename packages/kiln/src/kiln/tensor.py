"""The NumPy-like tensor API: ``import kiln.tensor as kt`` (see :mod:`kiln_graph.tensor`)."""

from kiln_graph.tensor import *  # noqa: F403
