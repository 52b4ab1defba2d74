"""The shared conformance runner: every backend against the unrewritten graph on the VM.

A :class:`ConformanceCase` is data: a name, a group and a builder returning the inputs,
outputs and input values of a small graph. :func:`run_cases` compiles all cases
of a group into ONE function (their inputs and outputs concatenated) on the backend and
on the reference (the Python VM, no rewrites), calls both and compares each case's
outputs: dtype, shape and values. It then does the same for gradients: the gradient
of a random projection ``sum(out * w)`` of each case's float outputs with respect to
its float inputs, compiled with all rewrites on the backend. Failures are reported
per case; when a group's function cannot be compiled or called at all, its cases are
run one by one to find the culprits.

The cases themselves are in :mod:`kiln_compile._conformance_cases`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import traceback
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from kiln_compile._function import function
from kiln_compile._mode import FAST_RUN, Mode
from kiln_graph import GradientError, KilnError, Variable, grad
from kiln_graph import tensor as kt


class CaseGraph(NamedTuple):
    """What a case builder returns: symbolic inputs, outputs, and one value per input."""

    inputs: list[Variable]
    outputs: list[Variable]
    values: list[Any]


@dataclasses.dataclass(frozen=True)
class ConformanceCase:
    """One conformance check: a small graph run on the backend and on the VM.

    Attributes
    ----------
    name
        Unique name, e.g. ``"elemwise/exp[float32]"``.
    build
        ``build(rng) -> CaseGraph``: new symbolic inputs, the outputs, input values.
    group
        Cases of one group are compiled into one function (one compile per group).
    rewrite
        Compile with all rewrites (``FAST_RUN``) on the backend instead of none: for
        forms only the rewrites build (fused Composites, FusedReduce, in-place ops).
    grad
        Also compare gradients (of a random projection of the float outputs).
    rtol, atol
        Tolerances for float values (default: by dtype, looser for gradients).
    """

    name: str
    build: Callable[[np.random.Generator], CaseGraph]
    group: str
    rewrite: bool = False
    grad: bool = True
    rtol: float | None = None
    atol: float | None = None

    def rng(self) -> np.random.Generator:
        """Return this case's random generator (seeded by its name: reproducible)."""
        seed = int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:8], "little")
        return np.random.default_rng(seed)


@dataclasses.dataclass
class CaseResult:
    """The outcome of one case: ``failures`` lists what differed (empty: passed)."""

    name: str
    failures: list[str] = dataclasses.field(default_factory=list)
    grad_checked: bool = False

    @property
    def ok(self) -> bool:
        """Whether the case passed."""
        return not self.failures


@dataclasses.dataclass
class ConformanceReport:
    """Per-case results of :func:`run_conformance`."""

    backend: str
    results: list[CaseResult]

    @property
    def failures(self) -> list[CaseResult]:
        """The cases that failed."""
        return [r for r in self.results if not r.ok]

    def summary(self) -> str:
        """Return one line per failed case (or a line saying all passed)."""
        bad = self.failures
        if not bad:
            return f"{len(self.results)} conformance case(s) passed on {self.backend!r}"
        lines = [f"{len(bad)} of {len(self.results)} case(s) failed on {self.backend!r}:"]
        for r in bad:
            lines.extend(f"  {r.name}: {f}" for f in r.failures)
        return "\n".join(lines)

    def check(self) -> None:
        """Raise AssertionError listing every failed case."""
        if self.failures:
            raise AssertionError(self.summary())


class _Built(NamedTuple):
    case: ConformanceCase
    graph: CaseGraph
    error: str


def _default_tol(dtype: np.dtype, gradient: bool) -> float:
    if dtype.itemsize <= 4:
        return 2e-4 if gradient else 1e-5
    return 1e-8 if gradient else 1e-10


def _compare(
    name: str, got: Any, want: Any, case: ConformanceCase, gradient: bool, backend: str
) -> list[str]:
    what = f"{name} on {backend!r}"
    got_a, want_a = np.asarray(got), np.asarray(want)
    if got_a.dtype != want_a.dtype:
        return [f"{what}: dtype {got_a.dtype}, the VM gives {want_a.dtype}"]
    if got_a.shape != want_a.shape:
        return [f"{what}: shape {got_a.shape}, the VM gives {want_a.shape}"]
    if want_a.dtype.kind in "fc":
        tol = _default_tol(want_a.dtype, gradient)
        rtol = case.rtol if case.rtol is not None else tol
        atol = case.atol if case.atol is not None else tol
        close = np.isclose(got_a, want_a, rtol=rtol, atol=atol, equal_nan=True)
        if not close.all():
            bad = np.argwhere(~close.reshape(want_a.shape) if want_a.ndim else ~close)
            first = tuple(int(i) for i in bad[0]) if len(bad) else ()
            return [
                f"{what}: {int((~close).sum())} of {close.size} values differ "
                f"(rtol={rtol}, atol={atol}); at {first}: {got_a[first]!r} vs {want_a[first]!r}"
            ]
        return []
    if not np.array_equal(got_a, want_a):
        return [f"{what}: values differ: {got_a!r} vs {want_a!r}"]
    return []


def _call_all(
    inputs: list[Variable], outputs: list[Variable], values: list[Any], mode: Mode
) -> list[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        # Pure functions: a shared generator is not advanced, so every compile of a
        # group draws from the same state.
        f = function(inputs, outputs, mode=mode, no_default_updates=True)
        return [np.asarray(r) for r in f(*values)]


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
    return (text[:400] + where).replace("\n", " ")


def _run_group(
    built: list[_Built],
    backend: str,
    mode: Mode,
    reference: Mode,
    gradient: bool,
    results: dict[str, CaseResult],
) -> None:
    """Compare the cases of ``built`` (all built) in one function; one by one on error."""
    inputs = [v for b in built for v in b.graph.inputs]
    outputs = [v for b in built for v in b.graph.outputs]
    values = [v for b in built for v in b.graph.values]
    try:
        want = _call_all(inputs, outputs, values, reference)
    except Exception as exc:  # noqa: BLE001
        if len(built) == 1:
            results[built[0].case.name].failures.append(
                f"the reference (VM) failed{' on the gradient' * gradient}: {_error_text(exc)}"
            )
            return
        for b in built:
            _run_group([b], backend, mode, reference, gradient, results)
        return
    try:
        got = _call_all(inputs, outputs, values, mode)
    except Exception as exc:  # noqa: BLE001
        if len(built) == 1:
            label = "gradient" if gradient else "function"
            results[built[0].case.name].failures.append(
                f"the {label} failed on {backend!r}: {_error_text(exc)}"
            )
            return
        for b in built:
            _run_group([b], backend, mode, reference, gradient, results)
        return
    k = 0
    for b in built:
        for j, _ in enumerate(b.graph.outputs):
            label = f"d/d input {j}" if gradient else f"output {j}"
            results[b.case.name].failures.extend(
                _compare(label, got[k], want[k], b.case, gradient, backend)
            )
            k += 1


def _gradient_graph(b: _Built, outputs: Sequence[Any]) -> CaseGraph | None:
    """Return the gradient graph of a case (None when it has nothing to differentiate)."""
    rng = b.case.rng()
    float_ins = [v for v in b.graph.inputs if v.type.dtype.startswith("float")]  # type: ignore[attr-defined]
    terms = []
    for out, value in zip(b.graph.outputs, outputs, strict=True):
        dtype = np.asarray(value).dtype
        if dtype.kind != "f":
            continue
        w = kt.constant(rng.normal(size=np.shape(value)).astype(dtype))
        terms.append(kt.sum(out * w))
    if not float_ins or not terms:
        return None
    cost = terms[0]
    for t in terms[1:]:
        cost = cost + kt.cast(t, cost.dtype) if t.dtype != cost.dtype else cost + t
    grads = grad(cost, float_ins, disconnected_inputs="ignore")
    return CaseGraph(list(b.graph.inputs), list(grads), list(b.graph.values))


def groups(cases: Iterable[ConformanceCase]) -> dict[str, list[ConformanceCase]]:
    """Return ``cases`` by group, in order (one compiled function per group)."""
    groups: dict[str, list[ConformanceCase]] = {}
    for c in cases:
        groups.setdefault(c.group, []).append(c)
    return groups


#: Cases compiled into one function at most: compilers' time grows faster than the size
#: of a function (LLVM), so a few medium functions compile faster than one large one.
CHUNK = 12


def _chunks(items: list[_Built], size: int) -> list[list[_Built]]:
    if not items:
        return []
    n = -(-len(items) // size)
    return [items[k::n] for k in range(n)]


def run_cases(
    backend: str,
    cases: Iterable[ConformanceCase],
    gradients: bool = True,
    values: bool = True,
    chunk: int = CHUNK,
) -> ConformanceReport:
    """Run conformance ``cases`` on ``backend``; return per-case results.

    Values (when ``values``) are compared with the unrewritten graph on the Python VM;
    a case with ``rewrite=True`` runs with all rewrites on the backend. Gradients (when
    ``gradients``; of a random projection of each case's float outputs, w.r.t. its
    float inputs) run with all rewrites on the backend, and without on the VM. Each
    group compiles as functions of at most ``chunk`` cases.
    """
    selected = list(cases)
    results = {c.name: CaseResult(c.name) for c in selected}
    if len(results) != len(selected):
        raise ValueError("run_conformance: case names must be unique")
    reference = Mode(rewrites=None, linker="vm")
    for members in groups(selected).values():
        built: list[_Built] = []
        for case in members:
            try:
                built.append(_Built(case, case.build(case.rng()), ""))
            except Exception as exc:  # noqa: BLE001
                results[case.name].failures.append(f"the case cannot be built: {_error_text(exc)}")
        for rewrite in (False, True) if values else ():
            part = [b for b in built if b.case.rewrite is rewrite]
            mode = FAST_RUN.with_linker(backend) if rewrite else Mode(None, backend)
            for piece in _chunks(part, chunk):
                _run_group(piece, backend, mode, reference, False, results)
        if gradients:
            _run_gradients(built, backend, reference, results, chunk)
    return ConformanceReport(backend, [results[c.name] for c in selected])


def _run_gradients(
    built: list[_Built],
    backend: str,
    reference: Mode,
    results: dict[str, CaseResult],
    chunk: int,
) -> None:
    grads: list[_Built] = []
    for b in built:
        if not b.case.grad or not results[b.case.name].ok:
            continue
        try:
            outs = _call_all(b.graph.inputs, b.graph.outputs, b.graph.values, reference)
            g = _gradient_graph(b, outs)
        except (GradientError, NotImplementedError, KilnError) as exc:
            results[b.case.name].failures.append(f"no gradient: {_error_text(exc)}")
            continue
        if g is not None:
            grads.append(_Built(b.case, g, ""))
            results[b.case.name].grad_checked = True
    mode = FAST_RUN.with_linker(backend)
    for piece in _chunks(grads, chunk):
        _run_group(piece, backend, mode, reference, True, results)
