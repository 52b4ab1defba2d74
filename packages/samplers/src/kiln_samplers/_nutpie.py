"""``sample_nutpie``: nutpie's NUTS (Rust) over the compiled-model protocol.

Two paths, one result:

- **pointers** (``native`` given: :class:`~kiln_samplers.NativePointers`, e.g. from
  ``CompiledModel.native()``): nutpie's Rust threads call the model's C
  callbacks directly, without the GIL. This is how nutpie's own PyMC integration
  drives it (``nutpie._lib.LogpFunc``, ``ExpandFunc``, ``PyMcModel``), a private API:
  hence the bounded versions (:mod:`kiln_samplers._nutpie_internals`).
- **Python** (no ``native``): nutpie calls ``model.logp_dlogp`` and ``model.expand``
  back through Python (``nutpie._lib.PyModel``), for any backend.

Both hand nutpie float64 values only: ``expand``'s outputs are declared float64 (the
C callback writes float64) and cast back to the model's own dtypes afterwards. nutpie
panics (a ``BaseException``) on a float32 or non-contiguous gradient, an exception in
the log-density, or an expanded point out of order or with Python floats for scalars;
the Python path guards against each: a point where the model raises or is not finite
is returned as ``-inf`` (nutpie rejects it, a divergence, as kiln's NUTS does), the
gradient is a fresh C-contiguous float64 array, and ``expand``'s dict is rebuilt in
``out_names`` order with arrays only. The C callbacks return codes instead (> 0 for a
recoverable bad point).

Draws come back as nutpie's raw Arrow trace and become a :class:`Trace` in kiln's
layout: ``posterior`` in ``out_names`` order with the model's shapes and dtypes,
``sample_stats`` in kiln's names (:data:`STAT_MAP`), the unconstrained draws. Ctrl-C
stops nutpie (``nutpie.sample`` aborts and returns what it drew): the draws made so far
come back, cut to the shortest chain, with a :class:`SamplingInterrupted` warning.
"""

from __future__ import annotations

import importlib
import time
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from kiln_samplers import _nutpie_internals as nutpie_internals
from kiln_samplers._protocol import CompiledModel, NativePointers
from kiln_samplers._sample import Trace, warn_interrupted
from kiln_samplers._threads import blas_threads_for, chain_workers

#: The nutpie versions whose private API (``nutpie._lib``) this adapter was checked on,
#: as a requirement (:mod:`kiln_samplers._nutpie_internals`).
SUPPORTED_NUTPIE_VERSIONS: str = nutpie_internals.describe()

#: kiln's sample_stats name -> nutpie's
STAT_MAP: dict[str, str] = {
    "diverging": "diverging",
    "energy": "energy",
    "energy_error": "energy_error",
    "max_energy_error": "max_energy_error",
    "tree_depth": "depth",
    "n_steps": "n_steps",
    "step_size": "step_size",
    "acceptance_rate": "mean_tree_accept",
    "lp": "logp",
    "step_size_bar": "step_size_bar",
    "reached_max_treedepth": "maxdepth_reached",
}
_STAT_DTYPES = {
    "diverging": np.bool_,
    "reached_max_treedepth": np.bool_,
    "tree_depth": np.int64,
    "n_steps": np.int64,
}

#: nutpie.sample / settings names that kl.sample's own arguments set.
_KILN_ARGUMENTS = {
    "draws": "draws",
    "num_draws": "draws",
    "tune": "tune",
    "num_tune": "tune",
    "chains": "chains",
    "num_chains": "chains",
    "cores": "cores",
    "seed": "random_seed",
    "progress_bar": "progressbar",
    "target_accept": "target_accept",
    "init_mean": "init",
}
#: nutpie.sample arguments the adapter sets itself (its output format).
_ADAPTER_ARGUMENTS = (
    "return_raw_trace",
    "blocking",
    "store_unconstrained",
    "zarr_store",
    "save_warmup",
    "sampler",
)
#: nutpie.sample's own keyword arguments that may be given.
_SAMPLE_ARGUMENTS = (
    "adaptation",
    "progress_callback",
    "progress_rate",
    "progress_template",
    "progress_style",
)
#: The mass-matrix adaptations that need nothing but the log-density ("flow" needs a
#: normalizing-flow adapter with a JAX/PyTorch log-density).
_ADAPTATIONS = ("diag", "draw_diag", "low_rank")
#: kiln's names for nutpie settings (so that kl.sample's nuts_sampler_kwargs carry over).
_ALIASES = {"max_treedepth": "maxdepth"}


_warned_versions: set[str] = set()


def nutpie_private_api(version: str | None = None) -> bool:
    """Whether the adapter drives nutpie's private API (a checked version) here.

    Another version is sampled through nutpie's public API, with one
    :class:`~kiln_samplers._nutpie_internals.NutpieVersionWarning` per version.
    """
    from importlib.metadata import version as installed  # not at import: 10-30 ms

    version = version or installed("nutpie")
    if nutpie_internals.supported(version):
        return True
    if version not in _warned_versions:
        _warned_versions.add(version)
        warnings.warn(
            f"nutpie {version} is installed; kiln's nutpie adapter was checked on "
            f"{SUPPORTED_NUTPIE_VERSIONS} (it drives nutpie's private nutpie._lib there). It "
            "uses nutpie's public API instead: nutpie calls the model back through Python "
            "(slower than the compiled callbacks); the draws are valid. For the fast path: "
            f"pip install '{SUPPORTED_NUTPIE_VERSIONS}'",
            nutpie_internals.NutpieVersionWarning,
            stacklevel=3,
        )
    return False


def import_nutpie() -> ModuleType:
    """Return the ``nutpie`` module.

    Raises
    ------
    ImportError
        If nutpie is not installed.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("nutpie")
    except PackageNotFoundError:
        raise ImportError(
            "nuts_sampler='nutpie' needs the package nutpie: "
            f"pip install '{SUPPORTED_NUTPIE_VERSIONS}'"
        ) from None
    return importlib.import_module("nutpie")


def nutpie_options(
    options: Mapping[str, Any], nutpie: ModuleType | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split and check ``nuts_sampler_kwargs`` for nutpie.

    Returns ``(sample_kwargs, settings)``: the keyword arguments of ``nutpie.sample``
    itself (``adaptation``, progress options) and nutpie's sampler settings
    (``maxdepth``, ``max_energy_error``, ``store_divergences``, ...; ``max_treedepth``
    is accepted for ``maxdepth``), each checked against nutpie's own settings object.

    Raises
    ------
    ValueError
        Naming every unknown key, a key that ``kl.sample`` sets itself (and the
        argument to use instead), or a value nutpie refuses.
    TypeError
        For a value of the wrong type.
    """
    nutpie = nutpie or import_nutpie()
    options = dict(options)
    for alias, name in _ALIASES.items():
        if alias in options:
            if name in options:
                raise ValueError(f"nuts_sampler_kwargs: give {alias!r} or {name!r}, not both")
            options[name] = options.pop(alias)
    own = sorted(k for k in options if k in _KILN_ARGUMENTS)
    if own:
        instead = ", ".join(f"{k} -> kl.sample({_KILN_ARGUMENTS[k]}=...)" for k in own)
        raise ValueError(f"nuts_sampler_kwargs: {own} are kl.sample's own arguments ({instead})")
    fixed = sorted(k for k in options if k in _ADAPTER_ARGUMENTS)
    if fixed:
        raise ValueError(
            f"nuts_sampler_kwargs: {fixed} cannot be given: kiln's nutpie adapter sets "
            "them (raw trace, unconstrained draws kept, NUTS only)"
        )
    sample_kwargs = {k: options.pop(k) for k in _SAMPLE_ARGUMENTS if k in options}
    adaptation = sample_kwargs.get("adaptation", "diag")
    if adaptation not in _ADAPTATIONS:
        raise ValueError(
            f"nuts_sampler_kwargs: adaptation={adaptation!r} is not supported; valid: "
            f"{list(_ADAPTATIONS)}"
        )
    if not nutpie_private_api():
        return sample_kwargs, options  # (nutpie.sample checks its settings itself)
    lib = nutpie_internals.private_lib(nutpie)
    kind = lib.PyNutsSettings.LowRank if adaptation == "low_rank" else lib.PyNutsSettings.Diag
    probe = kind(0)
    unknown, bad = [], []
    for key, value in options.items():
        try:
            probe.update({key: value})
        except AttributeError:
            unknown.append(key)
        except TypeError as exc:
            raise TypeError(f"nuts_sampler_kwargs[{key!r}] = {value!r}: {exc}") from None
        except ValueError as exc:
            bad.append(f"{key}={value!r} ({exc})")
    if unknown:
        valid = sorted([*_SAMPLE_ARGUMENTS, *_settings_names(probe), *_ALIASES])
        raise ValueError(
            f"nuts_sampler_kwargs: unknown keys {sorted(unknown)} for nutpie "
            f"{nutpie.__version__}; valid: {valid}"
        )
    if bad:
        raise ValueError(f"nuts_sampler_kwargs: nutpie refuses {'; '.join(bad)}")
    return sample_kwargs, options


def _settings_names(settings: Any) -> list[str]:
    """Return the settings names nutpie's ``update`` takes (its top-level and nested keys)."""
    names: list[str] = []

    def walk(tree: Mapping[str, Any]) -> None:
        for key, value in tree.items():
            if isinstance(value, Mapping):
                walk(value)
            else:
                names.append(key)

    walk(settings.as_dict().get("settings", {}))
    hidden = {"num_tune", "num_draws", "num_chains", "seed", "target_accept"}
    return sorted(set(names) - hidden)


def nutpie_seed(random_seed: Any) -> int:
    """Return nutpie's one 64-bit seed for ``random_seed`` (anything SeedSequence takes)."""
    if isinstance(random_seed, np.random.SeedSequence):
        seq = random_seed
    else:
        seq = np.random.SeedSequence(random_seed)
    return int(seq.generate_state(1, dtype=np.uint64)[0])


class _Outputs:
    """The names, shapes and dtypes of ``model.expand``, read at one point."""

    def __init__(self, model: CompiledModel, x: np.ndarray) -> None:
        values = model.expand(x)
        if list(values) != list(model.out_names):
            raise ValueError(
                f"model.expand returned {list(values)}, expected the keys out_names = "
                f"{list(model.out_names)} in that order"
            )
        arrays = [np.asarray(v) for v in values.values()]
        self.names = list(model.out_names)
        self.shapes = [a.shape for a in arrays]
        self.dtypes = [a.dtype for a in arrays]
        self.size = int(sum(a.size for a in arrays))


class _NutpieModel:
    """What ``nutpie.sample`` drives: it builds nutpie's Rust model for one run.

    ``nutpie.sample`` needs only ``n_dim`` and ``_make_sampler`` (and, for its own ArviZ
    conversion, which is not used here, ``coords`` and ``reparameterized_names``).
    """

    reparameterized_names: list[str] = []
    dims: dict[str, Any] = {}
    coords: dict[str, Any] = {}

    def __init__(
        self,
        lib: Any,
        model: CompiledModel,
        outputs: _Outputs,
        native: NativePointers | None,
    ) -> None:
        self._rust = lib
        self._model = model
        self._outputs = outputs
        self._native = native
        self.n_dim = int(model.ndim)

    def _init_point(self, seed: int) -> np.ndarray:
        x = np.ascontiguousarray(self._model.initial_point(int(seed)), dtype=np.float64)
        if x.shape != (self.n_dim,):
            raise ValueError(f"initial_point returned shape {x.shape}, expected ({self.n_dim},)")
        return x

    def _make_model(self) -> Any:
        lib, out = self._rust, self._outputs
        # nutpie needs a size for every dim; its own names are not used (see _to_trace).
        dims: dict[str, list[str]] = {}
        sizes: dict[str, int] = {}
        for name, shape in zip(out.names, out.shapes, strict=True):
            dims[name] = [f"{name}_dim_{k}" for k in range(len(shape))]
            sizes.update({d: int(n) for d, n in zip(dims[name], shape, strict=True)})
        variables = lib.PyVariable.new_variables(
            out.names, ["float64"] * len(out.names), [tuple(s) for s in out.shapes], sizes, dims
        )
        if self._native is not None:
            native = self._native
            keep = native.keep_alive
            logp = lib.LogpFunc(native.logp_cptr, native.user_data_ptr, keep)
            expand = lib.ExpandFunc(
                self.n_dim, out.size, native.expand_cptr, native.user_data_ptr, keep
            )
            return lib.PyMcModel(
                logp, expand, variables, self.n_dim, sizes, {}, self._init_point, None
            )
        return lib.PyModel(
            self._make_logp,
            self._make_expand,
            variables,
            self.n_dim,
            sizes,
            {},
            init_point_func=self._init_point,
        )

    def _make_logp(self) -> Any:
        model, n = self._model, self.n_dim

        def logp(x: np.ndarray) -> tuple[float, np.ndarray]:
            try:
                lp, grad = model.logp_dlogp(x)
                lp = float(lp)
                grad = np.ascontiguousarray(grad, dtype=np.float64)
            except Exception:  # noqa: BLE001  # a bad point: nutpie rejects it (a divergence)
                return -np.inf, np.zeros(n)
            if grad.shape != (n,) or not (np.isfinite(lp) and np.isfinite(grad).all()):
                return -np.inf, np.zeros(n)
            return lp, grad

        return logp

    def _make_expand(self, seed1: int, seed2: int, chain: int) -> Any:
        model, out = self._model, self._outputs
        pairs = list(zip(out.names, out.shapes, strict=True))

        def expand(x: np.ndarray) -> dict[str, np.ndarray]:
            values = model.expand(x)
            return {
                name: np.ascontiguousarray(values[name], dtype=np.float64).reshape(shape)
                for name, shape in pairs
            }

        return expand

    def public_model(self) -> Any:
        """Return the model as nutpie's public API builds it (Python callbacks)."""
        from nutpie.compiled_pyfunc import from_pyfunc

        out = self._outputs
        return from_pyfunc(
            self.n_dim,
            self._make_logp,
            self._make_expand,
            [np.dtype(np.float64)] * len(out.names),
            [tuple(s) for s in out.shapes],
            list(out.names),
            make_initial_point_fn=self._init_point,
        )

    def _make_sampler(
        self,
        settings: Any,
        init_mean: Any,
        cores: int,
        progress_type: Any,
        extra_callback: Any,
        extra_callback_rate: Any,
        store: Any,
    ) -> Any:
        model = self._make_model()
        make = self._rust.PySampler.from_pymc if self._native else self._rust.PySampler.from_pyfunc
        return make(
            settings, cores, model, progress_type, extra_callback, extra_callback_rate, store
        )


def _check_counts(draws: Any, tune: Any, chains: Any, target_accept: Any) -> None:
    for name, value, low in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name}: expected an int >= {low}, got {value!r}")
    if not isinstance(target_accept, float | int) or not 0 < target_accept < 1:
        raise ValueError(f"target_accept: expected a number in (0, 1), got {target_accept!r}")


def sample_nutpie(
    model: CompiledModel,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    cores: int | None = None,
    random_seed: Any = None,
    target_accept: float = 0.8,
    native: NativePointers | None = None,
    progressbar: bool = True,
    options: Mapping[str, Any] | None = None,
) -> Trace:
    """Run ``chains`` nutpie NUTS chains of ``tune`` warm-up and ``draws`` kept draws.

    Parameters
    ----------
    model
        A compiled model (:class:`~kiln_samplers.CompiledModel`); its
        ``initial_point(seed)`` starts each chain (nutpie gives each its own seed).
    draws, tune, chains, cores
        Kept draws and warm-up iterations per chain, the number of chains and how many
        run at once (default: ``min(chains, 4, CPUs)``).
    random_seed
        Anything ``numpy.random.SeedSequence`` takes (None: fresh entropy); the same
        seed gives the same draws.
    target_accept
        nutpie's step-size adaptation target.
    native
        The model's C callbacks (:class:`~kiln_samplers.NativePointers`): nutpie calls
        them from its threads without the GIL. Without them nutpie calls
        ``model.logp_dlogp`` / ``model.expand`` through Python.
    progressbar
        Show nutpie's progress bar.
    options
        More arguments for nutpie (see :func:`nutpie_options`), e.g.
        ``{"maxdepth": 12, "adaptation": "low_rank"}``.

    Returns
    -------
    Trace
        ``posterior`` in ``out_names`` order, ``sample_stats`` in kiln's names (plus
        ``reached_max_treedepth``), the unconstrained draws, ``sampling_time``.

    Raises
    ------
    ValueError, TypeError
        For bad counts or options (naming them); the model's own error if it fails at
        the first chain's initial point.

    Examples
    --------
    >>> trace = sample_nutpie(model, draws=500, tune=500, random_seed=1)  # doctest: +SKIP
    >>> trace.posterior["mu"].shape  # doctest: +SKIP
    (4, 500)
    """
    nutpie = import_nutpie()
    _check_counts(draws, tune, chains, target_accept)
    sample_kwargs, settings = nutpie_options(options or {}, nutpie)
    seed = nutpie_seed(random_seed)
    cores = chain_workers(chains, cores)
    x0 = np.ascontiguousarray(model.initial_point(seed), dtype=np.float64)
    model.logp_dlogp(x0)  # the model's own error, if it has one, before nutpie's threads
    outputs = _Outputs(model, x0)
    if native is not None:
        native.refresh()
    private = nutpie_private_api()
    lib = nutpie_internals.private_lib(nutpie) if private else None
    driver = _NutpieModel(lib, model, outputs, native if private else None)
    start = time.perf_counter()
    with blas_threads_for(cores):  # the chains' threads: a core each
        try:
            raw = nutpie.sample(
                driver if private else driver.public_model(),
                draws=draws,
                tune=tune,
                chains=chains,
                cores=cores,
                seed=seed,
                progress_bar=progressbar,
                return_raw_trace=True,
                store_unconstrained=True,
                target_accept=float(target_accept),
                **sample_kwargs,
                **settings,
            )
        except RuntimeError as exc:
            if "initialization points failed" in str(exc):
                raise RuntimeError(
                    "nutpie found no valid initial point (a finite log-density with a "
                    "finite, nowhere-zero gradient); with init='adapt_diag' a support point "
                    "may have a zero gradient: use init='jitter+adapt_diag', or check the "
                    f"model at initial_point(). nutpie: {str(exc).splitlines()[0]}"
                ) from exc
            raise
    elapsed = time.perf_counter() - start
    return _to_trace(raw, outputs, model.ndim, draws, tune, elapsed)


def _column(batch: Any, name: str) -> np.ndarray:
    """Return a column of an Arrow record batch as a NumPy array (lists flattened)."""
    col = batch.column(name)
    if hasattr(col, "flatten"):  # a list column: (rows * size,) values
        values = col.flatten().to_numpy(zero_copy_only=False)
        return np.asarray(values).reshape(len(col), -1)
    return np.asarray(col.to_numpy(zero_copy_only=False))


def _to_trace(
    raw: Any, outputs: _Outputs, ndim: int, draws: int, tune: int, elapsed: float
) -> Trace:
    """Return nutpie's raw Arrow trace as a :class:`Trace` (kiln's names, shapes, dtypes)."""
    import pyarrow  # nutpie's own dependency (its Arrow trace)

    draw_batches, stat_batches = raw.get_arrow_trace()
    chains: list[tuple[int, Any, Any, np.ndarray]] = []
    for draw_batch, stat_batch in zip(draw_batches, stat_batches, strict=True):
        d, s = pyarrow.record_batch(draw_batch), pyarrow.record_batch(stat_batch)
        keep = ~_column(s, "tuning").astype(bool)
        chain = int(_column(s, "chain")[0]) if s.num_rows else len(chains)
        chains.append((chain, d, s, keep))
    chains.sort(key=lambda c: c[0])
    n = min((int(c[3].sum()) for c in chains), default=0)
    interrupted = n < draws or len(chains) < 1
    if interrupted:
        warming_up = sum(not c[3].any() for c in chains) if tune else 0
        warn_interrupted(n, len(chains), len(chains), warming_up)
    posterior: dict[str, np.ndarray] = {}
    for name, shape, dtype in zip(outputs.names, outputs.shapes, outputs.dtypes, strict=True):
        per_chain = [_column(d, name)[keep][:n].reshape(n, *shape) for _, d, _, keep in chains]
        posterior[name] = np.stack(per_chain).astype(dtype, copy=False)
    stats: dict[str, np.ndarray] = {}
    for kiln_name, nutpie_name in STAT_MAP.items():
        per_chain = [_column(s, nutpie_name)[keep][:n] for _, _, s, keep in chains]
        stats[kiln_name] = np.stack(per_chain).astype(_STAT_DTYPES.get(kiln_name, np.float64))
    unconstrained = np.stack(
        [_column(s, "unconstrained_draw")[keep][:n].reshape(n, ndim) for _, _, s, keep in chains]
    )
    return Trace(posterior, stats, unconstrained, elapsed, tune, interrupted)
