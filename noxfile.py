"""Nox sessions for the kiln monorepo.

Sessions (``nox -l`` lists them; ``nox`` alone runs ``tests``):

- ``tests``: pytest over every ``packages/*/tests`` and ``integration/``, on one worker
  process per CPU (at most four; pytest-xdist, each test file whole on one worker).
- ``tests_torch``: the PyTorch backend's tests (``packages/torch/tests``, the conformance
  table on torch) and the integration tests of it (``integration/test_torch_*.py``), in
  their own virtualenv: torch's Linux wheel brings about 3 GB of CUDA libraries, kept out
  of ``tests`` (which leaves ``packages/torch`` out).
- ``lint``: ruff check, ruff format --check, and mypy over ``packages/*/src``.
- ``bench``: ``benchmarks/run.py``, one JSON result file per run in ``benchmarks/results/``
  (Stage 1, and the Numba backend's compile and call times on the benchmark models;
  the PyTorch and MLX backends next to Numba and JAX: torch is installed here).
- ``peer``: ``benchmarks/peer.py``, kiln's Stage 1 against PyTensor's rewriting, and
  kiln's Numba compile / call times against PyMC/PyTensor's Numba mode, on the
  benchmark models, in its own virtualenv with PyMC and PyTensor (pinned by
  ``benchmarks/peer-constraints.txt``, not by ``constraints.txt``). JAX is not
  installed; the JAX baseline of M3 runs only where it is importable.
- ``peer_sampling``: ``benchmarks/peer_sampling.py``, ``kl.sample`` next to PyMC's
  ``pm.sample`` (and nutpie when installed) on M1-M3: wall time and ESS per second;
  then ``gp.py``, ``sampling_efficiency.py`` and ``cost_growth.py`` (compile time
  against model size next to PyMC, per call against data size).
- ``demo``: ``examples/eight_schools.py`` (a model sampled end to end with the defaults).
- ``docs``: build ``docs/`` with Sphinx (MyST, autodoc; warnings are errors) into
  ``docs/_build/html``, then check the built site in headless Chromium
  (``docs/check_site.py``). Needs Graphviz's ``dot`` and Chromium on PATH
  (Debian: ``apt-get install graphviz chromium``; ``.ci/run`` installs them).

Every session installs all packages under ``packages/`` in editable mode, pinned by
``constraints.txt``. Extra arguments after ``--`` go to pytest / the script, e.g.
``nox -s tests -- -x packages/graph/tests``.
"""

from __future__ import annotations

import datetime
import graphlib
import os
import re
import shutil
import tomllib
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True
nox.options.download_python = "never"  # use the pyenv Python 3.12 (.python-version)
nox.options.sessions = ["tests"]

PYTHON = "3.12"
ROOT = Path(__file__).resolve().parent
CONSTRAINTS = "constraints.txt"  # nox runs sessions from the directory of this file
#: Pins of the tests_torch session that replace or add to constraints.txt's (torch's sympy
#: needs mpmath<1.4, while the other sessions test against mpmath 1.4).
TORCH_CONSTRAINTS = "constraints-torch.txt"
PEER_CONSTRAINTS = "benchmarks/peer-constraints.txt"  # PyTensor/PyMC, for `nox -s peer` only
BUILD_REQUIREMENTS = ("hatchling", "editables")  # what building packages/* editable needs
#: The external NUTS engines kiln.sample drives (optional for users, tested in CI).
ENGINES = ("nutpie", "numpyro", "blackjax")
#: The distributed engine kl.sample(executor=...) drives (kiln[dask]; tested in CI).
DISTRIBUTED = ("dask", "distributed")
#: The test sessions' runner: pytest, on several worker processes (pytest-xdist).
TEST_RUNNER = ("pytest", "pytest-xdist")
#: At most this many test workers (one per CPU below it): each holds its own compiled
#: functions and caches, about 1-2 GB with every backend imported.
MAX_TEST_WORKERS = 4
#: What the docs session installs besides the packages (pinned by constraints.txt).
DOCS_REQUIREMENTS = ("sphinx", "myst-parser", "matplotlib")
#: Packages whose third-party dependency is too heavy for every session (torch's Linux wheel
#: brings about 3 GB of CUDA libraries): installed only by the sessions that name them, and
#: their tests collected only there. Maps the package to its folder under packages/.
HEAVY_PACKAGES = {"kiln-torch": "torch"}
#: The system tools the docs need, each with the Debian package that provides it:
#: ``dot`` renders the pipeline diagram, Chromium checks the built site.
DOCS_TOOLS = {("dot",): "graphviz", ("chromium", "chromium-browser"): "chromium"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"cannot parse requirement {requirement!r}")
    return _canonical(match.group(1))


def local_packages() -> list[Path]:
    """Return the folders ``packages/*`` in dependency order (dependencies first)."""
    folders: dict[str, Path] = {}
    depends: dict[str, list[str]] = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        name = _canonical(project["name"])
        folders[name] = pyproject.parent
        depends[name] = [_requirement_name(r) for r in project.get("dependencies", [])]
    graph = {name: [d for d in deps if d in folders] for name, deps in depends.items()}
    order = graphlib.TopologicalSorter(graph).static_order()
    return [folders[name] for name in order]


def install_packages(
    session: nox.Session, *extra: str, heavy: tuple[str, ...] = (), constraints: str = CONSTRAINTS
) -> None:
    """Install every package in packages/ editable, plus ``extra``, pinned by constraints.txt.

    The build backend (hatchling, plus editables for its editable wheels) is installed
    first from the constraints, so that the editable builds run without build isolation
    and use the pinned versions. All packages go to pip in one command, so their local
    dependencies on each other resolve. The packages of :data:`HEAVY_PACKAGES` are left out
    unless named in ``heavy``.
    """
    session.install("-c", constraints, *BUILD_REQUIREMENTS)
    left_out = {ROOT / "packages" / folder for name, folder in HEAVY_PACKAGES.items()}
    left_out -= {ROOT / "packages" / HEAVY_PACKAGES[name] for name in heavy}
    editables = [
        arg
        for path in local_packages()
        if path not in left_out
        for arg in ("-e", str(path.relative_to(ROOT)))
    ]
    session.install("--no-build-isolation", "-c", constraints, *editables, *extra)


def _merged_constraints(session: nox.Session, override: str) -> str:
    """Write constraints.txt with the pins of ``override`` replacing its own; return the path."""
    pins = {}
    for name in (CONSTRAINTS, override):
        for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                pins[_requirement_name(line)] = line.strip()
    path = Path(session.create_tmp()) / "constraints-merged.txt"
    path.write_text("\n".join(pins.values()) + "\n", encoding="utf-8")
    return str(path)


def _test_paths() -> list[str]:
    heavy = {ROOT / "packages" / folder / "tests" for folder in HEAVY_PACKAGES.values()}
    paths = [p for p in sorted(ROOT.glob("packages/*/tests")) if p.is_dir() and p not in heavy]
    if (ROOT / "integration").is_dir():
        paths.append(ROOT / "integration")
    return [str(p.relative_to(ROOT)) for p in paths]


def _names_a_path(args: list[str]) -> bool:
    """Whether the user's pytest arguments select tests by path (then use only theirs)."""
    return any(not arg.startswith("-") and (ROOT / arg.split("::")[0]).exists() for arg in args)


def _workers(args: list[str]) -> list[str]:
    """Return pytest-xdist's options for the test sessions, unless ``args`` choose their own.

    One worker per CPU this process may use (at most :data:`MAX_TEST_WORKERS`); a test
    file runs whole on one worker (``--dist loadfile``), so that a module's fixtures are
    made once. ``-n 0`` after ``--`` runs the tests in one process (for ``--pdb``).
    """
    if any(a == "no:xdist" or a.startswith(("-n", "--numprocesses")) for a in args):
        return []
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return ["-n", str(max(1, min(cpus or 1, MAX_TEST_WORKERS))), "--dist", "loadfile"]


def _has_test_files() -> bool:
    patterns = ("packages/*/tests/**/test_*.py", "integration/**/test_*.py")
    return any(any(ROOT.glob(pattern)) for pattern in patterns)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the tests of every package and the integration tests."""
    # graphviz: kl.model_to_graphviz's optional dependency (kiln[graphviz]), tested here;
    # scikit-learn: its kernels are test_gp_sklearn's independent reference.
    install_packages(
        session,
        *TEST_RUNNER,
        "hypothesis",
        "scipy",
        "mpmath",
        "graphviz",
        "scikit-learn",
        *ENGINES,
        *DISTRIBUTED,
    )
    posargs = list(session.posargs)
    args = posargs if _names_a_path(posargs) else [*_test_paths(), *posargs]
    # pytest exits 5 when it collected no test; that is only acceptable while the
    # repository has no test file at all.
    success_codes = [0] if _has_test_files() else [0, 5]
    session.run("pytest", *_workers(args), *args, success_codes=success_codes)


@nox.session(python=PYTHON)
def tests_torch(session: nox.Session) -> None:
    """Run the PyTorch backend's tests and its integration tests (torch installed)."""
    constraints = _merged_constraints(session, TORCH_CONSTRAINTS)
    # The NUTS engines too: the engine matrix's torch row (test_torch_engine_matrix.py).
    install_packages(
        session, *TEST_RUNNER, "scipy", *ENGINES, heavy=("kiln-torch",), constraints=constraints
    )
    posargs = list(session.posargs)
    integration = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("integration/test_torch_*.py"))
    default = ["packages/torch/tests", *integration]
    args = posargs if _names_a_path(posargs) else [*default, *posargs]
    session.run("pytest", *_workers(args), *args)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Run ruff (lint + format check) and mypy over the packages' sources."""
    install_packages(session, "ruff", "mypy")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    sources = [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("packages/*/src"))]
    session.run("mypy", *sources)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Run the benchmarks; results go to benchmarks/results/bench-<UTC timestamp>.json."""
    script = "benchmarks/run.py"
    if not (ROOT / script).is_file():
        session.error(f"{script} does not exist yet")
    # torch too (its own pins): the benchmarks put the PyTorch backend next to the others.
    constraints = _merged_constraints(session, TORCH_CONSTRAINTS)
    install_packages(session, *DISTRIBUTED, heavy=("kiln-torch",), constraints=constraints)
    session.run("python", script, *_timestamped_output(list(session.posargs), "bench"))


def _timestamped_output(args: list[str], prefix: str) -> list[str]:
    """Return ``args`` with ``--output benchmarks/results/<prefix>-<UTC stamp>.json`` added."""
    if any(arg == "--output" or arg.startswith("--output=") for arg in args):
        return args
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    (ROOT / "benchmarks" / "results").mkdir(parents=True, exist_ok=True)
    return ["--output", f"benchmarks/results/{prefix}-{stamp}.json", *args]


@nox.session(python=PYTHON)
def peer(session: nox.Session) -> None:
    """Compare kiln with PyTensor on M1-M4 (PyMC models): Stage 1, Numba compile and calls.

    Results go to benchmarks/results/peer-<UTC timestamp>.json.
    """
    script = "benchmarks/peer.py"
    if not (ROOT / script).is_file():
        session.error(f"{script} does not exist yet")
    install_packages(session, "scipy")
    session.install("-c", PEER_CONSTRAINTS, "pytensor", "pymc")
    session.run("python", script, *_timestamped_output(list(session.posargs), "peer"))


@nox.session(python=PYTHON)
def peer_sampling(session: nox.Session) -> None:
    """Compare kl.sample with PyMC's samplers on M1-M3 (wall time, ESS/s), in one run.

    Then kl.gp with pm.gp (``benchmarks/gp.py``), the ESS per gradient against nutpie
    (``benchmarks/sampling_efficiency.py``) and how compile and per-call cost grow with
    model and data size next to PyMC (``benchmarks/cost_growth.py``). Results go to
    benchmarks/results/peer-sampling-, gp-, efficiency- and growth-<UTC timestamp>.json.
    """
    install_packages(session, "scipy", *ENGINES)
    session.install("-c", PEER_CONSTRAINTS, "pytensor", "pymc")
    output = _timestamped_output(list(session.posargs), "peer-sampling")
    session.run("python", "benchmarks/peer_sampling.py", *output)
    session.run("python", "benchmarks/gp.py", *_timestamped_output([], "gp"))
    session.run(
        "python", "benchmarks/sampling_efficiency.py", *_timestamped_output([], "efficiency")
    )
    session.run("python", "benchmarks/cost_growth.py", *_timestamped_output([], "growth"))


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """Run eight schools end to end with the defaults: examples/eight_schools.py."""
    script = "examples/eight_schools.py"
    if not (ROOT / script).is_file():
        session.error(f"{script} does not exist yet")
    install_packages(session)
    session.run("python", script, *session.posargs)


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the docs (warnings are errors) and check the built site in headless Chromium.

    The site goes to docs/_build/html. Arguments after ``--`` go to sphinx-build.
    """
    missing = [pkg for tools, pkg in DOCS_TOOLS.items() if not any(map(shutil.which, tools))]
    if missing:
        session.error(
            f"the docs need {' and '.join(missing)} on PATH (the diagram is rendered by "
            f"Graphviz's dot, the built site is checked in Chromium); on Debian: "
            f"apt-get install -y {' '.join(missing)}"
        )
    install_packages(session, *DOCS_REQUIREMENTS, *ENGINES)
    out = "docs/_build/html"
    session.run(
        "sphinx-build", "-E", "-W", "--keep-going", "-b", "html", "docs", out, *session.posargs
    )
    session.run("python", "docs/check_site.py", out)
