"""The NumPy side of kiln_graph's scalar ops: implementations and dtype rules.

The implementations that are not one NumPy ufunc (n-ary sums and products that may
write in place, ``switch``, round half to even), SciPy's special functions imported at
their first use (``import kiln`` stays light), and the dtype rule that reads an op's
output dtype from its ufunc (:func:`like_ufunc`). :mod:`kiln_graph._math` declares the
ops with them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from kiln_graph._errors import KilnTypeError


def _round_half_to_even(x: np.ndarray) -> np.ndarray:
    return np.round(x)


def _switch(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(c, a, b)


def _fold(ufunc: np.ufunc, xs: tuple[np.ndarray, ...], out: np.ndarray | None) -> Any:
    """Return ``(xs[0] op xs[1]) op xs[2] ...`` as a new array, or written into ``out``.

    ``out`` may be one of ``xs`` (in place): the steps before that operand is read
    allocate, so it is read before it is overwritten. The result is never an input.
    """
    if len(xs) == 1:
        if out is None:
            return np.array(xs[0], copy=True)
        np.copyto(out, xs[0], casting="unsafe")
        return out
    k = next((i for i, x in enumerate(xs) if x is out), 0)
    acc = xs[0]
    for i, x in enumerate(xs[1:], start=1):
        acc = ufunc(acc, x, out=out if i >= k else None)
    return acc


def _sum_of(*xs: np.ndarray, out: np.ndarray | None = None) -> Any:
    return _fold(np.add, xs, out)


def _prod_of(*xs: np.ndarray, out: np.ndarray | None = None) -> Any:
    return _fold(np.multiply, xs, out)


@functools.cache
def _ufunc_output_dtype(ufunc: np.ufunc, dtypes: tuple[str, ...]) -> str:
    try:
        resolved = ufunc.resolve_dtypes(tuple(np.dtype(d) for d in dtypes) + (None,))
    except TypeError as exc:  # NumPy's UFuncTypeError (no loop for these dtypes)
        raise KilnTypeError(
            f"{ufunc.__name__}: not defined for inputs of dtype {', '.join(dtypes)}; "
            "cast them first (e.g. kt.cast(x, 'float64'))"
        ) from exc
    return resolved[-1].name


class _special:  # noqa: N801 (reads as the function it names)
    """``scipy.special.<name>``, imported at its first use (``import kiln`` stays light).

    As a scalar op's ``nfunc`` it is a descriptor: the class attribute reads as the
    ufunc itself.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def resolve(self) -> np.ufunc:
        """Return the ufunc (importing ``scipy.special`` the first time)."""
        import scipy.special

        return getattr(scipy.special, self.name)  # type: ignore[no-any-return]

    def __get__(self, obj: object, owner: type | None = None) -> np.ufunc:
        return self.resolve()


def like_ufunc(ufunc: np.ufunc | _special) -> Callable[..., str]:
    """Dtype rule: the output dtype that NumPy's (or SciPy's) ``ufunc`` gives.

    Dtypes it has no loop for (``-`` on bool, ...) are an error when the graph is built.
    """

    def rule(*dtypes: str) -> str:
        resolved = ufunc.resolve() if isinstance(ufunc, _special) else ufunc
        return _ufunc_output_dtype(resolved, dtypes)

    return rule
