"""Shared pytest setup for every package's tests."""

import importlib.util
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator

import pytest

# The test suite never touches the user's cache (~/.cache/kiln): every on-disk cache
# lives in a temporary folder for this session, also seen by the subprocesses tests
# start (they inherit KILN_CACHE_DIR). Set before kiln_compile reads its config.
_CACHE_DIR = tempfile.mkdtemp(prefix="kiln-test-cache-")
os.environ["KILN_CACHE_DIR"] = _CACHE_DIR
# Numba-compiled functions are not also linked into shared libraries (a C compiler run
# per compile): packages/numba/tests/test_shared_library.py turns that on for its tests.
# KILN_FLAGS=shared_library=true in the environment runs the whole suite with them.
if "shared_library=" not in os.environ.get("KILN_FLAGS", ""):
    os.environ["KILN_FLAGS"] = ",".join(
        f for f in (os.environ.get("KILN_FLAGS", ""), "shared_library=false") if f
    )

# A test run started in the background by a non-interactive shell (`cmd &`) inherits
# SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the Ctrl-C tests
# (which send SIGINT to the main thread) need Python's usual handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import kiln_compile  # noqa: E402

kiln_compile.config.cache_dir = _CACHE_DIR

# PyTorch is a heavy optional stack with its own nox session (tests_torch): a plain
# ``pytest`` where it is not installed leaves the torch backend's tests out rather than
# failing on ``import torch``.
collect_ignore_glob = [] if importlib.util.find_spec("torch") else ["packages/torch/tests/*"]

# Tests run FAST_RUN graphs on the reference VM unless they name a backend: each backend
# package's own tests (and the shared conformance suite) select it explicitly, which
# keeps the number of LLVM compilations, hence the suite's time, bounded. Tests of the
# "auto" resolution and its fallback warning set these back locally.
kiln_compile.config.linker = "vm"
kiln_compile.config.warn_fallback = False


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir() -> Iterator[str]:
    """Point the on-disk caches at this session's temporary folder; delete it after."""
    yield _CACHE_DIR
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)
