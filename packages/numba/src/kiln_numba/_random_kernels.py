"""Compiled draws that generated code calls: one kernel per random variable, cached once.

Each kernel is the random variable's own ``core_fn`` (declared with the Op in
:mod:`kiln_random`), compiled by Numba: ``rv_<name>(rng, *params)`` returns one draw,
or writes a core array into its last argument. ``copy_rng`` copies a generator (in
object mode: Numba cannot build one) for draws that may not advance their input's
state in place.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import njit, types

from kiln_numba._cache import kernel_njit
from kiln_random import OPS, RandomVariable, copy_generator

_GENERATOR = types.npy_rng


def _copy(rng: np.random.Generator) -> np.random.Generator:
    return copy_generator(rng)


@kernel_njit
def copy_rng(rng):  # type: ignore[no-untyped-def]
    """Return a copy of the generator ``rng`` (through Python)."""
    with numba.objmode(new=_GENERATOR):
        new = _copy(rng)
    return new


def kernel_name(op: RandomVariable) -> str | None:
    """Return the name of ``op``'s compiled draw in this module (None: not one of kiln's)."""
    name = f"rv_{op.name}"
    kernel = globals().get(name)
    if kernel is None or kernel.py_func is not type(op).core_fn:
        return None
    return name


def compile_kernel(op: RandomVariable) -> Any:
    """Return a new njit dispatcher of ``op``'s ``core_fn`` (for random variables not in kiln)."""
    return njit(type(op).core_fn)


__all__ = ["copy_rng"]
for _op in OPS.values():
    globals()[f"rv_{_op.name}"] = kernel_njit(type(_op).core_fn)
    __all__.append(f"rv_{_op.name}")
