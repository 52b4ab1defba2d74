"""``kiln.sample(step=...)``: step methods over model variables, assigned as PyMC does.

The classes here (``kl.Metropolis([mu])``, ...) name model variables and options; at
sampling time they become :mod:`kiln_samplers` steps over the entries of the compiled
model's flat vector (discrete variables included, see ``CompiledModel(discrete=True)``).
Free variables no step covers are assigned automatically: continuous ones to NUTS,
Bernoulli ones to BinaryMetropolis, Categorical ones to CategoricalGibbsMetropolis, any
other discrete one to Metropolis; the assignment is reported (``CompoundStep`` then one
``>Step: [vars]`` line per step) to the ``kiln`` logger when it has a handler, else on
stderr unless ``progressbar=False``.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

import kiln_samplers as ks
from kiln._engines import EngineResult, EngineRun, run_kiln
from kiln_graph import KilnTypeError, KilnValueError, Variable
from kiln_model import Block, CompiledModel, Model, VariableInfo

_log = logging.getLogger("kiln")

#: Which free variables a step may take: continuous, binary, categorical or any.
_KINDS = ("continuous", "binary", "categorical", "any")


def _kind(info: VariableInfo) -> str:
    if np.dtype(str(info.value.dtype)).kind == "f":
        return "continuous"
    support = getattr(info.distribution, "support", "")
    return support if support in ("binary", "categorical") else "discrete"


class StepMethod:
    """A step method over model variables (``vars``) with its options.

    ``vars`` are free variables of the model (the variables, or their names); ``None``
    takes every variable of the kinds the step samples that no other step was given.
    """

    sampler: ClassVar[type[ks.Step]]
    #: The kinds of variables the step samples.
    kinds: ClassVar[tuple[str, ...]] = ("continuous",)

    def __init__(self, vars: Any = None, model: Model | None = None, **options: Any) -> None:
        if vars is not None and not isinstance(vars, list | tuple):
            vars = [vars]  # noqa: A001
        self.vars = None if vars is None else list(vars)
        self.model = model if model is not None else Model.get_context(error_if_none=False)
        self.options = options
        try:
            self.sampler(None, **options)  # validates the options now
        except TypeError as e:
            raise KilnTypeError(f"{type(self).__name__}: {e}") from None
        except ValueError as e:
            raise KilnValueError(f"{type(self).__name__}: {e}") from None
        self._infos: list[VariableInfo] = []

    @property
    def name(self) -> str:
        """The step's name in the printed assignment."""
        return type(self).__name__

    def __repr__(self) -> str:
        names = [i.name for i in self._infos] if self._infos else self.vars
        return f"{self.name}({names})"

    def _make(self, blocks: list[Block], indices: np.ndarray) -> ks.Step:
        return self.sampler(indices, **self.options)


class Metropolis(StepMethod):
    """Random-walk Metropolis (Normal proposal, rounded for discrete variables).

    Options: ``S`` (proposal sd per entry), ``scaling`` (1.0; tuned during warm-up),
    ``tune`` (True), ``tune_interval`` (100). Samples any free variable.

    Examples
    --------
    >>> with kl.Model():  # doctest: +SKIP
    ...     mu = kl.Normal("mu", 0, 1)
    ...     idata = kl.sample(step=kl.Metropolis([mu]))
    """

    sampler = ks.Metropolis
    kinds = _KINDS


class Slice(StepMethod):
    """Univariate slice sampling per entry. Options: ``w`` (1.0), ``tune``, ``iter_limit``."""

    sampler = ks.Slice


class DEMetropolis(StepMethod):
    """Differential-evolution Metropolis over the chains (needs chains >= 3).

    Options: ``lamb`` (2.38 / sqrt(2 d)), ``scaling`` (0.001), ``tune`` ("scaling",
    "lambda" or None), ``tune_interval`` (100).
    """

    sampler = ks.DEMetropolis


class DEMetropolisZ(StepMethod):
    """Differential-evolution Metropolis from each chain's own history.

    Options: those of :class:`DEMetropolis` and ``tune_drop_fraction`` (0.9).
    """

    sampler = ks.DEMetropolisZ


class BinaryMetropolis(StepMethod):
    """Flip each entry of Bernoulli variables, accepted by Metropolis. Option: ``order``."""

    sampler = ks.BinaryMetropolis
    kinds = ("binary",)


class CategoricalGibbsMetropolis(StepMethod):
    """Update each entry of Categorical variables given the rest.

    Options: ``proposal`` ("proportional": the exact conditional, default; "uniform":
    PyMC's default, one other category accepted by Metropolis), ``order``.
    """

    sampler = ks.CategoricalGibbsMetropolis
    kinds = ("categorical",)

    def __init__(self, vars: Any = None, model: Model | None = None, **options: Any) -> None:
        if "n_categories" in options:
            raise KilnTypeError(
                "CategoricalGibbsMetropolis: n_categories comes from the model's variables"
            )
        super().__init__(vars, model, **options)

    def _make(self, blocks: list[Block], indices: np.ndarray) -> ks.Step:
        k = np.concatenate(
            [np.full(b.slice.stop - b.slice.start, int(b.upper) + 1) for b in blocks]
        )
        return self.sampler(indices, n_categories=k, **self.options)


class NUTS(StepMethod):
    """NUTS over continuous variables (given the others, in a compound step).

    Options: ``target_accept`` (0.8), ``max_treedepth`` (10), ``max_energy_error``,
    ``step_size_jitter`` (none). Alone over every free variable it runs kiln's compiled NUTS engine.
    """

    sampler = ks.NUTS


class CompoundStep:
    """Several step methods, run one after the other at each draw (PyMC's CompoundStep)."""

    def __init__(self, methods: Sequence[StepMethod]) -> None:
        methods = list(methods)
        bad = [m for m in methods if not isinstance(m, StepMethod)]
        if not methods or bad:
            raise KilnTypeError(
                f"CompoundStep: expected a list of step methods (kl.Metropolis(...), ...), "
                f"got {bad or methods!r}"
            )
        self.methods = methods


def _steps_of(step: Any) -> list[StepMethod]:
    if isinstance(step, CompoundStep):
        return list(step.methods)
    if isinstance(step, StepMethod):
        return [step]
    if isinstance(step, list | tuple) and step:
        return CompoundStep(step).methods
    raise KilnTypeError(
        f"step: expected a step method (kl.Metropolis(...), ...), a list of them or a "
        f"kl.CompoundStep, got {step!r}"
    )


def _lookup(model: Model, var: Any, where: str) -> VariableInfo:
    free = model.free_variables
    for info in free:
        if var is info.rv or var is info.value:
            return info
        if isinstance(var, str) and model.prefixed(var) in (info.name, info.value.name):
            return info
    names = [i.name for i in free]
    label = var if isinstance(var, str) else getattr(var, "name", None) or var
    if isinstance(var, str | Variable):
        raise KilnValueError(
            f"step: {where} was given {label!r}, which is not a free variable of the model "
            f"(free variables: {names})"
        )
    raise KilnTypeError(f"step: {where} expects model variables or their names, got {var!r}")


def assign_steps(
    model: Model,
    step: Any,
    nuts_options: dict[str, Any],
) -> list[StepMethod]:
    """Return the step methods of every free variable: the given ones, then the assigned.

    Raises a clear error for a variable that is not in the model, given to two steps,
    or given to a step that cannot sample it.
    """
    given = [] if step is None else _steps_of(step)
    owner: dict[str, str] = {}
    for s in given:
        if s.model is not None and s.model is not model:
            raise KilnValueError(f"step: {s.name} was made in another model than the sampled one")
        if s.vars is None:
            continue
        s._infos = [_lookup(model, v, s.name) for v in s.vars]
        _claim(s, owner)
    for s in given:  # vars=None: every variable of its kinds no other step has
        if s.vars is None:
            s._infos = [i for i in model.free_variables if _kind(i) in s.kinds or "any" in s.kinds]
            s._infos = [i for i in s._infos if i.name not in owner]
            if not s._infos:
                raise KilnValueError(f"step: {s.name}() has no variables left to sample")
            _claim(s, owner)
    for s in given:
        for info in s._infos:
            kind = _kind(info)
            if kind not in s.kinds and "any" not in s.kinds:
                raise KilnValueError(
                    f"step: {s.name} cannot sample {info.name} ({kind}, "
                    f"{info.distribution.__name__}); {s.name} samples {' or '.join(s.kinds)} "
                    f"variables: give {info.name} to {_default_name(kind)} or Metropolis"
                )
    rest: dict[str, list[VariableInfo]] = {}
    for info in model.free_variables:
        if info.name not in owner:
            rest.setdefault(_default_name(_kind(info)), []).append(info)
    auto: list[StepMethod] = []
    for name, cls in (
        ("NUTS", NUTS),
        ("BinaryMetropolis", BinaryMetropolis),
        ("CategoricalGibbsMetropolis", CategoricalGibbsMetropolis),
        ("Metropolis", Metropolis),
    ):
        if name in rest:
            method = cls(model=model, **(nuts_options if cls is NUTS else {}))
            method._infos = rest[name]
            auto.append(method)
    return given + auto


def _claim(s: StepMethod, owner: dict[str, str]) -> None:
    for info in s._infos:
        if info.name in owner:
            raise KilnValueError(
                f"step: {info.name} is given to two step methods ({owner[info.name]} and "
                f"{s.name}); give each variable to one step"
            )
        owner[info.name] = s.name


def _default_name(kind: str) -> str:
    return {
        "continuous": "NUTS",
        "binary": "BinaryMetropolis",
        "categorical": "CategoricalGibbsMetropolis",
    }.get(kind, "Metropolis")


def describe(methods: Sequence[StepMethod]) -> str:
    """Return the assignment as PyMC prints it (``CompoundStep`` then ``>Step: [vars]``)."""
    lines = [f"{m.name}: [{', '.join(i.name for i in m._infos)}]" for m in methods]
    return lines[0] if len(lines) == 1 else "CompoundStep\n" + "\n".join(f">{s}" for s in lines)


def report(message: str, progressbar: bool) -> None:
    """Log ``message`` (INFO) to the ``kiln`` logger if it has a handler, else print it.

    Printed on stderr unless ``progressbar=False``: a handler on ``logging.getLogger("kiln")``
    (and its level) then decides where it goes.
    """
    if _log.handlers:
        _log.info(message)
    elif progressbar:
        print(message, file=sys.stderr)


def _nuts_options(run: EngineRun) -> dict[str, Any]:
    options = dict(run.options)
    accepted = ["max_energy_error", "max_treedepth", "step_size_jitter"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise KilnTypeError(
            f"nuts_sampler_kwargs: unknown keys {unknown} for NUTS in a compound step; "
            f"accepted: {accepted}"
        )
    return {"target_accept": run.target_accept, **options}


def run_steps(run: EngineRun, step: Any) -> EngineResult:
    """Sample with step methods: the given ``step`` (or None) plus the assigned ones."""
    methods = assign_steps(run.model, step, _nuts_options(run))
    free = run.model.free_variables
    if len(methods) == 1 and isinstance(methods[0], NUTS) and len(methods[0]._infos) == len(free):
        options = dict(methods[0].options)  # NUTS alone: kiln's compiled engine
        target_accept = options.pop("target_accept", run.target_accept)
        return run_kiln(dataclasses.replace(run, target_accept=target_accept, options=options))
    if any(isinstance(m, DEMetropolis) for m in methods) and run.chains < 3:
        raise KilnValueError(
            f"chains: DEMetropolis needs 3 chains or more (it jumps along the differences of "
            f"two other chains' points), got {run.chains}; or use kl.DEMetropolisZ"
        )
    report(describe(methods), run.progressbar)
    start = time.perf_counter()
    compiled = CompiledModel(run.model, mode=run.mode, jitter=run.jitter, discrete=True)
    x0 = compiled.initial_point(0)
    compiled.logp(x0)  # compile the log-density and the draws' expansion now, not per chain
    compiled.expand(x0)
    compile_time = time.perf_counter() - start
    blocks = {b.name: b for b in compiled.layout}
    samplers = []
    for m in methods:
        bs = [blocks[str(i.value.name)] for i in m._infos]
        indices = np.concatenate([np.arange(b.slice.start, b.slice.stop) for b in bs])
        samplers.append(m._make(bs, indices))
    max_treedepth = max(
        (int(m.options.get("max_treedepth", 10)) for m in methods if isinstance(m, NUTS)),
        default=10,
    )
    attrs: dict[str, Any] = {"step": describe(methods)}
    if run.executor is not None:
        return _run_steps_on_executor(run, compiled, samplers, compile_time, max_treedepth, attrs)
    trace = ks.sample_steps(
        compiled,
        samplers,
        draws=run.draws,
        tune=run.tune,
        chains=run.chains,
        cores=run.cores,
        random_seed=run.random_seed,
        progressbar=run.progressbar,
    )
    return EngineResult(trace, compiled, compile_time, max_treedepth, attrs)


def _run_steps_on_executor(
    run: EngineRun,
    compiled: CompiledModel,
    samplers: list[ks.Step],
    compile_time: float,
    max_treedepth: int,
    attrs: dict[str, Any],
) -> EngineResult:
    """Step-method chains as tasks of ``run.executor`` (:mod:`kiln._distributed`)."""
    from kiln._distributed import ChainsFailedError, executor_attrs, sample_steps_on_executor
    from kiln._executors import executor_adapter

    try:
        trace, details = sample_steps_on_executor(
            compiled,
            executor_adapter(run.executor),
            samplers,
            draws=run.draws,
            tune=run.tune,
            chains=run.chains,
            random_seed=run.random_seed,
            progressbar=run.progressbar,
        )
    except ChainsFailedError as error:
        if error.trace is not None:
            error.result = EngineResult(error.trace, compiled, compile_time, max_treedepth, attrs)
        raise
    return EngineResult(
        trace, compiled, compile_time, max_treedepth, {**attrs, **executor_attrs(details)}
    )


def needs_steps(model: Model, step: Any) -> bool:
    """Whether ``kl.sample`` must use step methods: a ``step`` given, or discrete variables."""
    return step is not None or any(_kind(i) != "continuous" for i in model.free_variables)
