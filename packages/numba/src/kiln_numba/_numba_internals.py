"""Every private name of Numba that kiln_numba uses, and the Numba versions they were checked on.

Numba's public API (``numba.njit``, ``numba.cfunc``, ``numba.types``, ``numba.extending``)
compiles kiln's generated code; what makes it fast to load does not exist there:

- a per-function on-disk cache beside the generated module, checksummed and never
  fatal, and dispatchers with explicit signatures compiled at first use: in
  :mod:`kiln_numba._numba_cache_internals` (``numba.core.caching``, ``CFunc``, a
  dispatcher's ``_cache``, ``_compile_for_args``, ``get_call_template``), which this
  module's :func:`usable` gates;
- what :mod:`kiln_numba._shared_library` reads of a compile result and of Numba's C
  extensions (:func:`object_code`, :func:`global_variable_names`, :func:`entry_names`,
  :func:`environment_of`, :func:`runtime_helpers`, :func:`load_extension`,
  :func:`make_function`);
- a compiled function's native entry point (:func:`jit_address`:
  ``numba.experimental.function_type._get_jit_address``), exported by the shared
  library of a native wrapper, and Numba's native calling convention, through which
  the C functions of the native log-density ABI compiled into that library call it
  (:data:`NATIVE_ABI_C`: the arrays' data-model fields, the status and ``excinfo_t``
  of ``numba.core.callconv.CPUCallConv``, ``NRT_Free``);
- the code-generation helpers of ``@intrinsic`` implementations (``numba.core.cgutils``,
  ``numba.core.imputils.impl_ret_borrowed``; for allocating arrays without Numba's
  overloads of ``np.empty``, :func:`allocation_helpers`: ``numba.np.arrayobj``'s
  ``make_array`` and ``populate_array``);
- two options of ``numba.njit`` that its documentation does not list
  (:func:`callee_options`: ``no_cpython_wrapper``, ``no_cfunc_wrapper`` of
  ``numba.core.options.DefaultOptions``), and for the same functions a compiler
  pipeline (``numba.core.compiler.CompilerBase``, ``DefaultPassBuilder``,
  ``numba.core.compiler_machinery``, ``numba.core.typed_passes.NativeLowering``)
  lowering into a link-only subclass of ``numba.core.codegen.JITCodeLibrary``.

Each was read on the Numba versions of :data:`CHECKED` (``pyproject.toml`` bounds Numba
the same way). With another version, or when a name is missing, :func:`usable` is false
and one :class:`NumbaVersionWarning` says so: kiln_numba then uses Numba's public API
only (``numba.njit(cache=True)``, ``numba.cfunc(cache=True)``, signatures compiled
eagerly, no shared libraries, the Numba NUTS kernel instead of the C one). Everything
still compiles and gives the same numbers; only loading is slower.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.metadata
import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

#: The Numba versions (``>= first, < second``, by major and minor) whose internals the
#: names used here were checked against.
CHECKED: tuple[tuple[int, int], tuple[int, int]] = ((0, 68), (0, 69))
#: Numba's C extensions holding the runtime functions compiled code calls, by the
#: prefix Numba gives their symbols (``numba_<name>``, ``NRT_<name>``), with their files.
RUNTIME_EXTENSIONS: dict[str, tuple[str, str]] = {
    "numba._helperlib": ("_helperlib", "numba_"),
    "numba._dynfunc": ("_dynfunc", "numba_"),
    "numba.core.runtime._nrt_python": ("core/runtime/_nrt_python", "NRT_"),
}


class NumbaVersionWarning(UserWarning):
    """The installed Numba is not one kiln_numba's use of Numba internals was checked on."""


def version_problem(version: str) -> str | None:
    """Return why Numba ``version`` is outside :data:`CHECKED`, or None if inside."""
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return f"numba {version!r} has a version kiln_numba cannot read"
    (lo_major, lo_minor), (hi_major, hi_minor) = CHECKED
    if (lo_major, lo_minor) <= (major, minor) < (hi_major, hi_minor):
        return None
    return (
        f"numba {version} is installed; kiln_numba's fast loading paths use Numba "
        f"internals checked on numba>={lo_major}.{lo_minor},<{hi_major}.{hi_minor} only"
    )


def _warn(reason: str) -> None:
    warnings.warn(
        f"{reason}. kiln uses Numba's public API instead (its own cache, no shared "
        "libraries, the Numba NUTS kernel): results are the same, loading compiled "
        f"functions is slower. Install a supported Numba "
        f"(pip install 'numba>={CHECKED[0][0]}.{CHECKED[0][1]},<{CHECKED[1][0]}.{CHECKED[1][1]}') "
        "to get them back.",
        NumbaVersionWarning,
        stacklevel=3,
    )


@functools.cache
def version_supported() -> bool:
    """Whether the installed Numba's version is in :data:`CHECKED` (without importing Numba).

    One :class:`NumbaVersionWarning` when not.
    """
    try:
        version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        return False
    reason = version_problem(version)
    if reason is not None:
        _warn(reason)
    return reason is None


#: The private names looked up, by module: all present on a checked version.
_NAMES = {
    "numba.core.caching": (
        "FunctionCache", "IndexDataCacheFile", "CompileResultCacheImpl", "_CacheLocator",
        "_SourceFileBackedLocatorMixin",
    ),
    "numba.core.ccallback": ("CFunc",),
    "numba.core.registry": ("CPUDispatcher",),
    "numba.core.typeinfer": ("register_dispatcher",),
    "numba.core.environment": ("lookup_environment",),
    "numba.core.runtime": ("rtsys",),
    "numba.core.serialize": ("dumps",),
    "numba.experimental.function_type": ("_get_jit_address",),
    "numba.np.arrayobj": ("make_array", "populate_array"),
    "numba.core.codegen": ("JITCodeLibrary",),
    "numba.core.compiler_lock": ("require_global_compiler_lock",),
    "numba.core.compiler": ("CompilerBase", "DefaultPassBuilder"),
    "numba.core.compiler_machinery": ("PassManager", "register_pass"),
    "numba.core.typed_passes": ("NativeLowering",),
}  # fmt: skip


@functools.cache
def usable() -> bool:
    """Whether kiln_numba uses Numba's internals here (imports Numba).

    True on a version of :data:`CHECKED` where every name used is present; otherwise
    one :class:`NumbaVersionWarning` (naming what is missing) and False.
    """
    if not version_supported():
        return False
    missing = []
    for module_name, names in _NAMES.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            missing.append(module_name)
            continue
        missing += [f"{module_name}.{n}" for n in names if not hasattr(module, n)]
    if missing:
        _warn(f"this Numba lacks internals kiln_numba uses ({', '.join(missing)})")
    return not missing


# --- functions called only from compiled code -------------------------------------------


def callee_options() -> dict[str, Any]:
    """Return the ``numba.njit`` options of a function called only from compiled code.

    Numba compiles a CPython wrapper (unboxing every argument) and a C-callback wrapper
    with each function, and optimizes and emits both, although a function only another
    njit function calls never runs them: for generated helpers of many array parameters
    they are a fifth of the compile. And it optimizes the function's module and makes
    machine code of it, then does both again inside every caller its code is linked
    into; the pipeline of :func:`_link_only_compiler` gives it a library that does
    neither (the caller optimizes and emits the linked code once). Without checked
    internals: no options (the wrappers are compiled, nothing else changes).
    """
    if not usable():
        return {}
    from numba.core.options import DefaultOptions

    names = ("no_cpython_wrapper", "no_cfunc_wrapper")
    if not all(hasattr(DefaultOptions, n) for n in names):
        return {}
    return {
        "no_cpython_wrapper": True,
        "no_cfunc_wrapper": True,
        "pipeline_class": _link_only_compiler(),
    }


@functools.cache
def _link_only_library_class() -> type:
    from numba.core.codegen import JITCodeLibrary
    from numba.core.compiler_lock import require_global_compiler_lock

    class LinkOnlyLibrary(JITCodeLibrary):  # type: ignore[misc, valid-type]
        """The code of a function that only other compiled functions call.

        Finalizing it links in what it calls and stops there: no module optimization,
        no machine code. A caller links its code in (``_get_module_for_linking``) and
        optimizes and emits it with its own, once. It has no entry point of its own;
        its Environment pointers (``common`` globals that Numba fills after compiling)
        are defined in a module of their own in the JIT, where the callers' copies of
        the code find them as they find a compiled callee's.
        """

        def finalize(self) -> None:
            require_global_compiler_lock()
            self._raise_if_finalized()
            seen: set[Any] = set()
            for library in self._linking_libraries:
                if library not in seen:
                    self._reload_init.update(library._reload_init)
                    seen.add(library)
                    self._final_module.link_in(library._get_module_for_linking(), preserve=True)
            self._final_module.verify()
            self._finalize_dynamic_globals()
            self._verify_declare_only_symbols()
            self._define_environments()
            self._finalized = True

        def _define_environments(self) -> None:
            from llvmlite import binding, ir

            engine = self._codegen._engine
            names = [
                gv.name
                for gv in self._final_module.global_variables
                if gv.name.startswith("_ZN08NumbaEnv")
                and not gv.is_declaration
                and not engine.get_global_value_address(gv.name)
            ]
            if not names:
                return
            module = self._codegen._create_empty_module(f"{self.name}.environments")
            pointer = ir.IntType(8).as_pointer()
            for name in names:
                gv = ir.GlobalVariable(module, pointer, name=name)
                gv.linkage = "common"
                gv.initializer = ir.Constant(pointer, None)
            compiled = binding.parse_assembly(str(module))
            self._codegen._add_module(compiled)
            engine.finalize_object()

        def get_pointer_to_function(self, name: str) -> int:
            self._ensure_finalized()
            return 0  # no machine code: only callers' libraries hold it

        def serialize_using_object_code(self) -> Any:
            raise RuntimeError(f"{self.name}: code only callers link in is not cached alone")

    return LinkOnlyLibrary


@functools.cache
def _link_only_compiler() -> type:
    """Return a Numba compiler class whose functions get a :func:`_link_only_library_class`."""
    from numba.core.compiler import CompilerBase, DefaultPassBuilder
    from numba.core.compiler_machinery import PassManager, register_pass
    from numba.core.typed_passes import NativeLowering

    library_class = _link_only_library_class()

    @register_pass(mutates_CFG=True, analysis_only=False)
    class LinkOnlyLowering(NativeLowering):  # type: ignore[misc, valid-type]
        _name = "kiln_link_only_lowering"

        def run_pass(self, state: Any) -> bool:
            if state.library is None:
                codegen = state.targetctx.codegen()
                state.library = library_class(codegen, state.func_id.func_qualname)
            return bool(super().run_pass(state))

    class LinkOnlyCompiler(CompilerBase):  # type: ignore[misc, valid-type]
        """Numba's nopython pipeline, lowering into a link-only library."""

        def define_pipelines(self) -> list[Any]:
            default = DefaultPassBuilder.define_nopython_pipeline(self.state)
            pm = PassManager("kiln_link_only")
            for pass_class, description in default.passes:
                if pass_class is NativeLowering:
                    pass_class = LinkOnlyLowering
                pm.add_pass(pass_class, description)
            pm.finalize()
            return [pm]

    return LinkOnlyCompiler


# --- what the shared library reads of a compile result and of Numba's extensions ------------


def object_code(library: Any) -> bytes:
    """Return the object code of a compile result's library (compiled, or loaded by the cache)."""
    return getattr(library, "kiln_object_code", None) or library._get_compiled_object()  # type: ignore[no-any-return]


def global_variable_names(library: Any) -> list[str]:
    """Return the names of the global variables of the library's final LLVM module."""
    module = getattr(library, "_shared_module", None) or library._final_module
    return [gv.name for gv in module.global_variables]


def entry_names(cres: Any) -> tuple[str, str, str]:
    """Return a compile result's (CPython wrapper, native function, Environment) symbols."""
    fndesc = cres.fndesc
    return fndesc.llvm_cpython_wrapper_name, fndesc.llvm_func_name, fndesc.env_name


def environment_of(symbol: str) -> tuple[str, list[Any]] | None:
    """Return the module name and constants of Numba's Environment ``symbol``, if cacheable."""
    from numba.core.environment import lookup_environment

    env = lookup_environment(symbol) if symbol.startswith("_ZN08NumbaEnv") else None
    if env is None or not env.can_cache():
        return None
    return str(env.globals["__name__"]), list(env.consts)


def runtime_helpers() -> dict[str, tuple[str, str]]:
    """Return ``symbol -> (extension, c_helpers key)`` of Numba's runtime functions."""
    helpers: dict[str, tuple[str, str]] = {}
    for extension, (_, prefix) in RUNTIME_EXTENSIONS.items():
        for name in sys.modules[extension].c_helpers:
            symbol = name if name.startswith("_") else prefix + name
            helpers.setdefault(symbol, (extension, name))
    return helpers


def helper_address(extension: ModuleType, name: str) -> int:
    """Return the address of runtime function ``name`` of a Numba extension."""
    return int(extension.c_helpers[name])


def load_extension(name: str) -> ModuleType:
    """Return Numba's C extension ``name``, loaded from its file if Numba is not imported."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec("numba")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("numba is not installed")
    base = Path(spec.submodule_search_locations[0]) / RUNTIME_EXTENSIONS[name][0]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = base.with_name(base.name + suffix)
        if path.is_file():
            break
    else:
        raise ImportError(f"no file for {name}")
    file_spec = importlib.util.spec_from_file_location(name, path)
    assert file_spec is not None and file_spec.loader is not None
    module = importlib.util.module_from_spec(file_spec)
    file_spec.loader.exec_module(module)
    sys.modules[name] = module
    if name == "numba.core.runtime._nrt_python":
        module.memsys_use_cpython_allocator()  # what Numba's import does
    return module


def new_environment(dynfunc: ModuleType, module_name: str, consts: list[Any]) -> Any:
    """Return a Numba ``Environment`` of ``module_name`` holding ``consts``."""
    env = dynfunc.Environment({"__name__": module_name})
    env.consts[:] = consts
    return env


def make_function(
    dynfunc: ModuleType, module: ModuleType, name: str, doc: str, address: int, env: Any,
    keepalive: tuple[Any, ...],
) -> Any:  # fmt: skip
    """Return the Python function of a CPython wrapper at ``address`` (as Numba makes it)."""
    return dynfunc.make_function(module, name, doc, address, env, keepalive)


# --- native entry points and intrinsics ------------------------------------------------------


def jit_address(dispatcher: Any, signature: Any) -> int:
    """Return the address of ``dispatcher``'s native entry for ``signature`` (compiles it)."""
    from numba.experimental.function_type import _get_jit_address

    return int(_get_jit_address(dispatcher, signature))


#: The C functions of the native log-density ABI (``kiln_compile.NativeModel``) over a
#: native wrapper's entry in Numba's native calling convention, compiled into the
#: wrapper's shared library, so that a process that maps it hands samplers C function
#: pointers without importing Numba. The includer defines ``KILN_NATIVE_ENTRY`` (the
#: entry's symbol, a string), ``KILN_ABI_N`` (the length of ``x``), the return codes
#: (``KILN_OK``, ``KILN_RAISED``, ``KILN_LOGP_NOT_FINITE``, ``KILN_GRAD_NOT_FINITE``,
#: ``KILN_WRONG_LENGTH``, ``KILN_EXPAND_RAISED``: ``kiln_numba.native_c``'s, whose
#: ``numba.cfunc`` callbacks compute the same codes) and ``KILN_ABI_LOGP`` or
#: ``KILN_ABI_EXPAND`` (which of the two functions, ``kiln_abi_logp`` or
#: ``kiln_abi_expand``, for a ``logp_grad`` or an ``expand`` wrapper of
#: ``kiln_numba.native``). ``user_data`` is ``native_c``'s header: ``int64[4]``, the
#: address and length of the logp wrapper's ``user_data``, then the expand wrapper's.
#:
#: The entry returns a status (0, or >= 1 where the code raised: a raise inside
#: ``kiln_raise(code)`` with a run-time value allocates its ``excinfo_t`` and the values
#: with NRT, which the Python wrapper would free after reading them: freed here) and
#: takes a pointer to the result, one to the ``excinfo_t`` pointer, then each 1-d
#: contiguous array as its data-model fields (meminfo, parent, nitems, itemsize, data,
#: shape, stride).
NATIVE_ABI_C = r"""
#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *pickled; int32_t pickled_size; void *values; void *unwrap; int32_t n_values;
} kiln_excinfo;

void NRT_Free(void *ptr);

#define KILN_ARRAY(type) void *, void *, int64_t, int64_t, type *, int64_t, int64_t
#define KILN_PASS(data, n) NULL, NULL, (int64_t)(n), 8, (data), (int64_t)(n), 8

static void kiln_free_excinfo(int32_t status, kiln_excinfo *info) {
    if (status >= 1 && info != NULL && info->n_values > 0) {
        NRT_Free(info->values);
        NRT_Free(info);
    }
}

#ifdef KILN_ABI_LOGP
int32_t kiln_numba_entry(double *ret, kiln_excinfo **excinfo, KILN_ARRAY(const double),
                         KILN_ARRAY(double), KILN_ARRAY(const int64_t))
    __asm__(KILN_NATIVE_ENTRY);

int kiln_abi_logp(size_t n, const double *x, double *grad, double *logp,
                  const void *user_data) {
    const int64_t *header = (const int64_t *)user_data;
    kiln_excinfo *info = NULL;
    double value = 0.0;
    size_t i;
    int32_t status;
    if (n != KILN_ABI_N) return KILN_WRONG_LENGTH;
    status = kiln_numba_entry(&value, &info, KILN_PASS(x, n), KILN_PASS(grad, n),
                              KILN_PASS((const int64_t *)(intptr_t)header[0], header[1]));
    if (status != 0) {
        kiln_free_excinfo(status, info);
        return KILN_RAISED;
    }
    *logp = value;
    if (!isfinite(value)) return KILN_LOGP_NOT_FINITE;
    for (i = 0; i < n; i++)
        if (!isfinite(grad[i])) return KILN_GRAD_NOT_FINITE;
    return KILN_OK;
}
#endif

#ifdef KILN_ABI_EXPAND
int32_t kiln_numba_entry(int64_t *ret, kiln_excinfo **excinfo, KILN_ARRAY(const double),
                         KILN_ARRAY(double), KILN_ARRAY(const int64_t))
    __asm__(KILN_NATIVE_ENTRY);

int kiln_abi_expand(size_t n, size_t n_out, const double *x, double *out,
                    const void *user_data) {
    const int64_t *header = (const int64_t *)user_data;
    kiln_excinfo *info = NULL;
    int64_t value = 0;
    int32_t status;
    if (n != KILN_ABI_N) return KILN_WRONG_LENGTH;
    status = kiln_numba_entry(&value, &info, KILN_PASS(x, n), KILN_PASS(out, n_out),
                              KILN_PASS((const int64_t *)(intptr_t)header[2], header[3]));
    if (status != 0) {
        kiln_free_excinfo(status, info);
        return KILN_EXPAND_RAISED;
    }
    return (int)value;
}
#endif
"""
#: The runtime functions :data:`NATIVE_ABI_C` calls (the library reaches them as it
#: reaches those of the model's code).
NATIVE_ABI_RUNTIME = ("NRT_Free",)


def as_dtype(numba_type: Any) -> Any:
    """Return the NumPy dtype of a Numba scalar type."""
    from numba.np.numpy_support import as_dtype as numba_as_dtype

    return numba_as_dtype(numba_type)


def allocation_helpers() -> tuple[Any, Any, Any]:
    """Return ``(cgutils, make_array, populate_array)``, for intrinsics that allocate arrays.

    ``numba.np.arrayobj.make_array`` gives the structure of an array type and
    ``populate_array`` fills its fields (:mod:`kiln_numba._alloc`).
    """
    from numba.core import cgutils
    from numba.np.arrayobj import make_array, populate_array

    return cgutils, make_array, populate_array


def intrinsic_helpers() -> tuple[Any, Any]:
    """Return ``(cgutils, impl_ret_borrowed)``, for ``@intrinsic`` code generation."""
    from numba.core import cgutils
    from numba.core.imputils import impl_ret_borrowed

    return cgutils, impl_ret_borrowed
