"""A compiled model's log-density as data, to rebuild in another process or machine.

:meth:`CompiledModel.package` writes a :class:`ModelPackage`: the rewritten
log-density-and-gradient graph (the data-only format of the Stage-1 cache,
:func:`kiln_compile.dumps_graph`), the values of its Data, the backend, the flat
vector's start point and the versions that decide what the graph compiles to. It holds
bytes, arrays, strings and numbers only: pickling it pickles no compiled code, and a
worker never unpickles one. :func:`load_package` rebuilds the log-density from it with
no rewriting (the graph is already rewritten: the worker links exactly the client's
graph, so a chain computes the same bits), through the worker's own kiln cache, and
returns a :class:`PackagedModel`, which the samplers take like a
:class:`~kiln_model.CompiledModel`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import platform
import threading
from typing import Any

import numpy as np

from kiln_compile import (
    CorruptGraphError,
    Function,
    Mode,
    NativeModel,
    dumps_graph,
    function,
    get_linker,
    loads_graph,
    native_model,
)
from kiln_graph import KilnValueError, SharedVariable, TensorSharedVariable
from kiln_graph import tensor as kt

#: Bumped whenever the fields of :class:`ModelPackage` change meaning.
FORMAT = 1

#: The third-party library each backend's generated code depends on (beside NumPy).
_BACKEND_LIBRARIES = {"numba": "numba", "jax": "jax", "torch": "torch", "mlx": "mlx"}


def pure_jax_outputs(f: Function, x: Any) -> list[Any]:
    """Evaluate ``f``'s graph as a pure JAX function of ``x`` (JAX backend only).

    The shared variables' (Data) current values are read at each call: under
    ``jax.jit`` that is when the caller traces, so a sampler compiled before
    ``set_data`` keeps the values it was traced with.
    """
    pure = getattr(f.thunk, "fn", None)
    if f.linker != "jax" or pure is None:
        raise KilnValueError(
            f"logp_jax / expand_jax need the JAX backend, but this model is compiled "
            f"with {f.linker!r}: compile it with mode=kiln.Mode(linker='jax') "
            "(kiln.sample(backend='jax'))"
        )
    shared = f.fgraph.inputs[f.fgraph.n_explicit :]
    values = [s.get_value(borrow=True) for s in shared]  # type: ignore[attr-defined]
    return list(pure([x, *values]))


class VersionMismatchError(KilnValueError):
    """A package was written by a kiln, NumPy or backend of another version than the reader's."""


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version  # 10-30 ms to import

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"


@functools.cache
def _environment_versions(linker: str) -> tuple[tuple[str, str], ...]:
    # Read once per process: every task of a run checks them (metadata lookups cost ms).
    return tuple(sorted(_read_versions(linker).items()))


def environment_versions(linker: str) -> dict[str, str]:
    """Return the versions that decide what a graph compiles to on backend ``linker``.

    kiln's packages (the one of the backend included), NumPy, the backend's library and
    Python's ``major.minor``: a worker whose versions differ refuses a package.
    """
    return dict(_environment_versions(linker))


def _read_versions(linker: str) -> dict[str, str]:
    module = type(get_linker(linker)).__module__.split(".")[0]
    versions = {
        "python": ".".join(platform.python_version_tuple()[:2]),
        "numpy": np.__version__,
        "kiln-compile": _version("kiln-compile"),
        "kiln-model": _version("kiln-model"),
        module.replace("_", "-"): _version(module.replace("_", "-")),
    }
    if linker in _BACKEND_LIBRARIES:
        versions[_BACKEND_LIBRARIES[linker]] = _version(_BACKEND_LIBRARIES[linker])
    return versions


@dataclasses.dataclass(frozen=True)
class ModelPackage:
    """A compiled model's log-density as data (see the module's docstring).

    Attributes
    ----------
    graph
        ``[x, *data] -> [logp, dlogp]`` after Stage 1, in the Stage-1 cache's format.
    data, data_shapes
        The values of the graph's Data (shared variables) in input order, and their
        static shapes.
    linker
        The backend that links the graph.
    digest
        The rewritten graph's digest: the rebuilt graph must have the same.
    start, discrete_mask, jitter
        What :meth:`PackagedModel.initial_point` needs (as ``CompiledModel``'s).
    versions
        :func:`environment_versions` of the writer.
    """

    graph: bytes
    data: tuple[np.ndarray, ...]
    data_shapes: tuple[tuple[int | None, ...], ...]
    linker: str
    digest: str
    start: np.ndarray
    discrete_mask: np.ndarray
    jitter: bool
    versions: dict[str, str]
    format: int = FORMAT

    @property
    def ndim(self) -> int:
        """The length of the flat vector."""
        return int(self.start.shape[0])

    @property
    def key(self) -> str:
        """What identifies the rebuilt log-density: graph digest, backend and data."""
        h = hashlib.sha256(f"{self.digest}|{self.linker}|{self.format}".encode())
        for value in self.data:
            h.update(f"{value.dtype.str}{value.shape}".encode())
            h.update(np.ascontiguousarray(value).reshape(-1).view(np.uint8))  # (no copy)
        return h.hexdigest()

    @property
    def nbytes(self) -> int:
        """About how many bytes the package takes when shipped."""
        arrays = (*self.data, self.start, self.discrete_mask)
        return len(self.graph) + sum(int(a.nbytes) for a in arrays)


def package_function(
    fn: Function, start: np.ndarray, discrete_mask: np.ndarray, jitter: bool
) -> ModelPackage:
    """Return the :class:`ModelPackage` of ``fn`` (``x -> [logp, dlogp]``, compiled).

    Raises
    ------
    KilnValueError
        If the graph holds a shared variable that is not an array (a random generator).
    """
    fg = fn.fgraph
    data = fg.inputs[fg.n_explicit :]
    for v in data:
        if not isinstance(v, TensorSharedVariable):
            raise KilnValueError(
                f"the log-density reads {v} ({v.type}), which cannot be shipped to a worker "
                "(only arrays can)"
            )
    return ModelPackage(
        graph=dumps_graph(fg.inputs, fg.outputs[: fg.n_outputs]),
        data=tuple(np.array(v.get_value(borrow=True)) for v in data),  # type: ignore[attr-defined]
        data_shapes=tuple(tuple(v.type.shape) for v in data),  # type: ignore[attr-defined]
        linker=fn.linker,
        digest=fg.digest,
        start=np.array(start, dtype="float64"),
        discrete_mask=np.array(discrete_mask, dtype=bool),
        jitter=bool(jitter),
        versions=environment_versions(fn.linker),
    )


def jittered_start(start: np.ndarray, discrete_mask: np.ndarray, jitter: bool, seed: Any) -> Any:
    """Return ``start`` plus Uniform(-1, 1) noise (by ``seed``) on continuous entries.

    The initial point of :class:`CompiledModel` and of :class:`PackagedModel` (the same
    draws for the same seed, so a chain starts where it would locally).
    """
    x = np.array(start, dtype="float64")
    if jitter:
        noise = np.random.default_rng(seed).uniform(-1.0, 1.0, size=x.shape)
        x += np.where(discrete_mask, 0.0, noise)
    return x


class PackagedModel:
    """A log-density rebuilt from a :class:`ModelPackage`: the samplers' protocol.

    Has ``ndim``, ``discrete_mask``, :meth:`logp_dlogp`, :meth:`logp`,
    :meth:`initial_point` and :meth:`native`: what a NUTS chain needs (the draws'
    values are computed where the chains are gathered, from the client's model).
    """

    def __init__(self, package: ModelPackage, fn: Function) -> None:
        self.package = package
        self.function = fn
        self.ndim = package.ndim
        self.discrete_mask = package.discrete_mask
        self.out_names: list[str] = []
        self.dims: dict[str, Any] = {}
        self.coords: dict[str, Any] = {}
        self._native: NativeModel | None = None

    def logp_dlogp(self, x: Any) -> tuple[float, np.ndarray]:
        """Return the log-density at ``x`` and its gradient."""
        logp, dlogp = self.function(np.ascontiguousarray(x, dtype="float64"))
        return float(logp), np.ascontiguousarray(dlogp)

    def logp(self, x: Any) -> float:
        """Return the log-density at ``x``."""
        return self.logp_dlogp(x)[0]

    def logp_jax(self, x: Any) -> Any:
        """Return the log-density at ``x`` as a JAX scalar (a package of the JAX backend).

        As :meth:`kiln_model.CompiledModel.logp_jax`: pure and traceable, for the JAX
        samplers on a worker.
        """
        return pure_jax_outputs(self.function, x)[0]

    def expand(self, x: Any) -> dict[str, np.ndarray]:
        """Not available on a worker: the draws' values are computed by the client."""
        raise KilnValueError("a packaged model has no expand: its draws are expanded by the client")

    def initial_point(self, seed: Any = None) -> np.ndarray:
        """Return the start point, jittered by ``seed`` as the client's model would."""
        p = self.package
        return jittered_start(p.start, p.discrete_mask, p.jitter, seed)  # type: ignore[no-any-return]

    def native(self, expand: bool = False) -> NativeModel:
        """Return the log-density as the native C ABI.

        Raises ``kiln_compile.NativeUnavailable`` where the backend has none.
        """
        if self._native is None:
            self._native = native_model(self.function, None)
        return self._native


_loaded: dict[str, PackagedModel] = {}
_lock = threading.Lock()


def check_versions(package: ModelPackage, where: str = "this process") -> None:
    """Raise :class:`VersionMismatchError` if ``package``'s versions are not this process's."""
    if package.format != FORMAT:
        raise VersionMismatchError(
            f"model package format {package.format} from the client, {FORMAT} in {where}: "
            "install the same kiln version on the client and the workers"
        )
    mine = environment_versions(package.linker)
    differ = [
        f"{name} {theirs} on the client but {mine.get(name, 'not installed')} in {where}"
        for name, theirs in sorted(package.versions.items())
        if mine.get(name) != theirs
    ]
    if differ:
        raise VersionMismatchError(
            "the client and the worker differ: "
            + "; ".join(differ)
            + " (install the same versions on both: the worker compiles the client's graph)"
        )


def load_package(package: ModelPackage, where: str = "this process") -> PackagedModel:
    """Rebuild the log-density of ``package`` (once per process for each package key).

    Checks the versions first (:func:`check_versions`), links the shipped graph on its
    backend with no rewriting (the worker's kiln cache serves a graph it has built
    before) and checks the rebuilt graph's digest.
    """
    if not isinstance(package, ModelPackage):
        raise KilnValueError(f"package: expected a ModelPackage, got {type(package).__name__}")
    check_versions(package, where)
    key = package.key
    with _lock:
        found = _loaded.get(key)
        if found is not None:
            return found
        x = kt.vector("x", shape=(package.ndim,))
        data: list[SharedVariable] = [
            kt.shared(value, shape=shape)
            for value, shape in zip(package.data, package.data_shapes, strict=True)
        ]
        try:
            outputs = loads_graph(package.graph, [x, *data])
        except CorruptGraphError as exc:
            raise KilnValueError(
                f"the model package's graph cannot be read in {where} ({exc}): it was damaged "
                "on its way, or written by another kiln"
            ) from exc
        fn = function([x], outputs, mode=Mode(None, linker=package.linker), trust_input=True)
        if fn.fgraph.digest != package.digest:
            raise KilnValueError(
                f"the rebuilt log-density is not the client's graph (digest "
                f"{fn.fgraph.digest[:16]} in {where}, {package.digest[:16]} on the client)"
            )
        model = PackagedModel(package, fn)
        _loaded[key] = model
        return model
