"""The Numba linker: the entry point of backend ``numba`` (group ``kiln.linkers``).

It links a function graph through :mod:`kiln_numba._linker` (generated module, Numba's
cache, the shared library) and provides the native log-density ABI through
:mod:`kiln_numba.native_c`; it sits above both so that neither imports the other.
"""

from __future__ import annotations

import sys
from typing import Any

from kiln_compile import FunctionGraph, LinkerDoc, NativeModel, Profile
from kiln_numba._codegen import generate
from kiln_numba._linker import (
    _MODULE_FILE,
    NumbaThunk,
    _entry,
    _load_shared,
    _module_file,
    check_dtypes,
    load_function,
    module_name,
    stage2_key,
)
from kiln_numba.native_c import native_model


class NumbaLinker:
    """Link a function graph into one Numba-compiled function (cached on disk)."""

    name = "numba"
    #: The Numba-only rewrites (core shapes of random variables and Blockwise).
    rewrite_tags: tuple[str, ...] = ("numba",)
    doc = LinkerDoc(
        compiles="one generated `@njit` function for the whole graph, compiled by "
        "LLVM (llvmlite) on the first call",
        system_compiler="optional: `cc` links the machine code into a shared library "
        "that later processes load without Numba (LLVM ships with llvmlite)",
        cache="`numba/<key>/`: the generated module, Numba's machine code and its "
        "shared library (described in `numba-lib/`)",
        note="The default. Lowest per-call overhead on a CPU; the only backend with a "
        "native log-density, so kiln's NUTS runs its whole loop in compiled code.",
    )

    def native(self, logp_function: Any, expand_function: Any = None) -> NativeModel:
        """Return a model's log-density (and expand function) as the native C ABI.

        The capability of :class:`kiln_compile.NativeLinker`: ``numba.cfunc`` callbacks
        around the model's generated code (:func:`kiln_numba.native_c.native_model`).
        Raises :class:`kiln_compile.NativeUnavailable` saying why it cannot (an Op in
        Numba's object mode, data that is not arrays).
        """
        return native_model(logp_function, expand_function)

    def link(self, fgraph: FunctionGraph, profile: Profile | None = None) -> NumbaThunk:
        """Generate, load (or compile) and return the callable computing ``fgraph``.

        Raises
        ------
        KilnTypeError
            If a value of the graph has a dtype Numba cannot compile (``float16``).
        """
        check_dtypes(fgraph)
        gen = generate(fgraph)
        key = stage2_key(fgraph, gen)
        shared = _load_shared(key, gen)
        if shared is not None:
            info: dict[str, Any] = {
                "key": key,
                "module": str(_entry(key) / _MODULE_FILE),
                "cache": "hit",
                "loader": "shared library",
            }
            thunk = NumbaThunk(
                None,
                gen.constants,
                gen,
                info,
                shared=shared,
                load_dispatcher=lambda: load_function(fgraph, gen, key)[0],
            )
        elif gen.cacheable and module_name(key) not in sys.modules:
            # The module file is written now and executed (importing Numba) at the first
            # call: a caller that only needs the native wrapper of this function, loaded
            # from its own shared library, never imports Numba.
            path, outcome = _module_file(key, gen.source)
            info = {"key": key, "module": str(path) if path is not None else "in memory"}
            if path is None:
                info["cache"] = outcome
            thunk = NumbaThunk(
                None,
                gen.constants,
                gen,
                info,
                load_dispatcher=lambda: load_function(fgraph, gen, key)[0],
            )
        else:
            jit_fn, info = load_function(fgraph, gen, key)
            thunk = NumbaThunk(jit_fn, gen.constants, gen, info)
        if profile is not None:
            profile.stage2 = info
        return thunk
