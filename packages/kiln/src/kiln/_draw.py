"""``kl.draw``: forward draws of random variables, as NumPy arrays (PyMC's ``pm.draw``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln._predictive import _generators, _Seeded
from kiln_compile import function
from kiln_graph import KilnTypeError, KilnValueError, Variable
from kiln_graph import tensor as kt

__all__ = ["draw"]


def draw(
    vars: Variable | Sequence[Variable],  # noqa: A002  (PyMC's name)
    draws: int = 1,
    random_seed: Any = None,
    **kwargs: Any,
) -> np.ndarray | list[np.ndarray]:
    """Return forward draws of one or a list of random variables.

    One function of the variables is compiled (``kiln.function``, which advances each
    generator the draws use) and called ``draws`` times.

    Parameters
    ----------
    vars
        A random variable (a model variable, a ``.dist()`` draw or any expression of
        draws), or a list of them.
    draws
        The number of draws.
    random_seed
        An int, a ``np.random.SeedSequence``, a ``np.random.Generator`` or None (fresh
        entropy); a seed gives the same draws every time.
    **kwargs
        Passed to :func:`kiln.function` (e.g. ``mode=``).

    Returns
    -------
    An array of shape ``(draws, *shape)`` (``shape`` alone when ``draws`` is 1), or a
    list of them when ``vars`` is a list.

    Examples
    --------
    >>> import kiln as kl
    >>> x = kl.draw(kl.Normal.dist(0.0, 1.0, size=3), draws=5, random_seed=1)
    >>> x.shape
    (5, 3)
    """
    single = isinstance(vars, Variable)
    if single:
        outputs = [vars]
    elif isinstance(vars, Sequence) and not isinstance(vars, str):
        outputs = list(vars)
    else:
        raise KilnTypeError(f"vars: expected a random variable or a list of them, got {vars!r}")
    if not outputs:
        raise KilnValueError("vars: the list of variables is empty")
    tensors = []
    for i, v in enumerate(outputs):
        if not isinstance(v, Variable):
            raise KilnTypeError(f"vars[{i}]: expected a random variable, got {v!r}")
        tensors.append(kt.as_tensor(v))
    if isinstance(draws, bool) or not isinstance(draws, int | np.integer) or draws < 1:
        raise KilnValueError(f"draws: expected a positive int, got {draws!r}")
    f = function([], tensors, **kwargs)
    collected: list[list[np.ndarray]] = [[] for _ in tensors]
    with _Seeded(_generators(tensors), random_seed):
        for _ in range(int(draws)):
            values = f()
            values = values if isinstance(values, list) else [values]
            for store, value in zip(collected, values, strict=True):
                store.append(np.array(value))
    results = [c[0] if draws == 1 else np.stack(c) for c in collected]
    return results[0] if single else results
