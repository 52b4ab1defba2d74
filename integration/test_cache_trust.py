"""The cache's trust model: what is read back runs no planted code.

Entries are bound to their keys, folders are private, untrusted roots and files are
refused, temporaries of killed processes go, ``cache=false`` writes nothing, and
``config.cache_dir`` set in Python is every writer's.
"""

from __future__ import annotations

import os
import pickle
import socket
import stat
import struct
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import kiln_graph.tensor as kt
from kiln_compile import (
    FAST_RUN,
    STAGE1,
    CacheWarning,
    DiskCache,
    clear_function_memo,
    config,
    dumps_data,
    dumps_graph,
    function,
    loads_data,
    sweep_temporaries,
)
from kiln_compile import _cache as cache_module

REPO = Path(__file__).resolve().parent.parent
VM_RUN = FAST_RUN.with_linker("vm")
_is_root = hasattr(os, "geteuid") and os.geteuid() == 0
_posix = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="no user ids here")


class _Planted:
    """Unpickling this creates ``path``: the proof that a pickle ran code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (str(self.path), "w"))


@pytest.fixture
def root(tmp_path, monkeypatch):
    """Give this test a fresh cache root, with this process's trust memory reset."""
    folder = tmp_path / "cache"
    monkeypatch.setattr(cache_module, "_checked_folders", {})
    monkeypatch.setattr(cache_module, "_untrusted_warned", set())
    monkeypatch.setattr(cache_module, "_unwritable", set())
    with config.change(cache_dir=str(folder), memo=False):
        yield folder


def _logp(offset: float):
    x = kt.vector("x")
    return x, kt.sum((x - kt.constant(np.array([offset, offset]))) ** 2)


def _stage1_entry(root: Path) -> Path:
    (entry,) = (root / "stage1").iterdir()
    return entry


# --- data, not pickles ------------------------------------------------------------------


def test_a_stage1_entry_is_data_and_a_planted_pickle_runs_nothing(root, tmp_path):
    x, y = _logp(1.0)
    f = function([x], y, mode=VM_RUN, profile=True)
    key = f.profile.cache_key
    payload = STAGE1.get(key)
    assert payload is not None and payload.startswith(b"KILNDATA")
    assert b"\x80\x05" not in payload[:16]  # no pickle protocol header
    marker = tmp_path / "ran"
    STAGE1.put(key, pickle.dumps(_Planted(marker)))  # a valid entry: checksum recomputed
    clear_function_memo()
    g = function([x], y, mode=VM_RUN, profile=True)
    assert not marker.exists()
    assert g.profile.cache == "miss" and "discarded" in g.profile.cache_note
    assert g(np.array([1.0, 3.0])) == pytest.approx(4.0)


def test_a_numba_lib_description_is_data_and_a_planted_pickle_runs_nothing(root, tmp_path):
    from kiln_numba import _shared_library

    marker = tmp_path / "ran"
    cache = DiskCache("numba-lib")
    key = "ab" * 32
    cache.put(key, pickle.dumps(_Planted(marker)))
    with config.change(shared_library=True):
        if not _shared_library.supported():
            pytest.skip("no shared libraries on this platform")
        assert _shared_library.load(key, root / "numba" / key[:32], "m") is None
    assert not marker.exists()
    assert cache.get(key) is None  # discarded as damaged


def test_data_round_trips_and_refuses_objects():
    value = {
        "a": (1, 2.5, -0.0, float("inf"), 2**70, True, None, "s"),
        "b": [np.dtype("<f8"), np.arange(6.0).reshape(2, 3), np.float32(1.5), b"raw"],
        "c": frozenset({1, 2}),
        "d": slice(1, None, 2),
        "e": 1 + 2j,
        "z": np.array(3, dtype=np.int32),
    }
    back = loads_data(dumps_data(value))
    assert back["a"] == value["a"] and str(back["a"][2]) == "-0.0"
    assert back["b"][0] == np.dtype("float64") and back["b"][3] == b"raw"
    np.testing.assert_array_equal(back["b"][1], value["b"][1])
    assert back["b"][2] == np.float32(1.5) and back["b"][2].dtype == np.float32
    assert back["c"] == value["c"] and back["d"] == value["d"] and back["e"] == value["e"]
    assert back["z"].shape == () and back["z"].dtype == np.int32
    from kiln_compile import CorruptDataError, GraphNotSerializableError

    for bad in (print, object(), np.array([object()]), _Planted(Path("x"))):
        with pytest.raises(GraphNotSerializableError):
            dumps_data(bad)
    with pytest.raises(CorruptDataError):
        loads_data(pickle.dumps({"a": 1}))


def test_a_stored_graph_names_only_classes_already_defined():
    from kiln_compile import CorruptGraphError, loads_graph

    x, y = _logp(0.0)
    blob = dumps_graph([x], [y])
    head = struct.Struct("<8sIQ")
    magic, fmt, length = head.unpack_from(blob)
    document = blob[head.size : head.size + length]
    assert b"kiln_graph._elemwise:Elemwise" in document
    for name in (b"os:system", b"subprocess:Popen", b"builtins:eval", b"kiln_graph:Apply"):
        text = document.replace(b"kiln_graph._elemwise:Elemwise", name)
        forged = head.pack(magic, fmt, len(text)) + text + blob[head.size + length :]
        with pytest.raises(CorruptGraphError, match="no .* class"):
            loads_graph(forged, [x])


# --- entries bound to their keys --------------------------------------------------------


def test_an_entry_copied_under_another_key_is_refused(root):
    # Two functions of one structure: only the constants differ (so do the keys).
    x1, y1 = _logp(1.0)
    f1 = function([x1], y1, mode=VM_RUN, profile=True)
    x2, y2 = _logp(5.0)
    f2 = function([x2], y2, mode=VM_RUN, profile=True)
    k1, k2 = f1.profile.cache_key, f2.profile.cache_key
    assert k1 != k2
    STAGE1.path(k2).write_bytes(STAGE1.path(k1).read_bytes())  # f1's entry under f2's key
    clear_function_memo()
    x3, y3 = _logp(5.0)
    f3 = function([x3], y3, mode=VM_RUN, profile=True)
    assert f3.profile.cache_key == k2 and f3.profile.cache == "miss"
    assert f3(np.array([5.0, 5.0])) == pytest.approx(0.0)  # f2's logp, not f1's


# --- private folders, untrusted roots and files -----------------------------------------


@_posix
def test_folders_and_entries_are_private_under_a_loose_umask(root):
    old = os.umask(0o002)
    try:
        assert DiskCache("trust").put("cd" * 32, b"x")
    finally:
        os.umask(old)
    for path in (root, root / "trust"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "trust" / ("cd" * 32 + ".kc")).stat().st_mode) == 0o600


@_posix
@pytest.mark.parametrize("mode", [0o770, 0o777, 0o722])
def test_a_root_others_can_write_is_not_used(root, mode):
    cache = DiskCache("trust")
    assert cache.put("cd" * 32, b"x")
    os.chmod(root, mode)
    cache_module._checked_folders.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.get("cd" * 32) is None
        assert not cache.put("ef" * 32, b"y")
        assert cache.folder("sub") is None
    messages = [str(w.message) for w in caught if w.category is CacheWarning]
    assert len(messages) == 1, messages
    assert "can write it" in messages[0] and "chmod 700" in messages[0]
    os.chmod(root, 0o700)


@_posix
@pytest.mark.skipif(not _is_root, reason="giving a file to another user needs root")
def test_a_root_or_entry_another_user_owns_is_not_loaded(root):
    cache = DiskCache("trust")
    assert cache.put("cd" * 32, b"x")
    os.chown(cache.path("cd" * 32), 12345, 12345)
    with pytest.warns(CacheWarning, match="owned by user id 12345"):
        assert cache.get("cd" * 32) is None
    assert cache.path("cd" * 32).exists()  # not ours to delete
    os.chown(root, 12345, 12345)
    cache_module._checked_folders.clear()
    with pytest.warns(CacheWarning, match="not using the cache.*owned by user id 12345"):
        assert not cache.put("ef" * 32, b"y")


@_posix
def test_an_entry_file_others_can_write_is_not_loaded(root):
    cache = DiskCache("trust")
    assert cache.put("cd" * 32, b"x")
    os.chmod(cache.path("cd" * 32), 0o666)
    with pytest.warns(CacheWarning, match="not loading the cache file.*mode 666"):
        assert cache.get("cd" * 32) is None
    assert cache.put("cd" * 32, b"z") and cache.get("cd" * 32) == b"z"  # rewritten private


# --- temporaries of killed processes ----------------------------------------------------


def test_temporaries_of_dead_processes_and_old_ones_are_swept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    names = {
        "dead": f".tmp-{host}-{dead.pid}-abc",
        "alive": f".tmp-{host}-{os.getpid()}-def",
        "elsewhere": ".tmp-otherhost-1-ghi",
        "old": ".tmp-otherhost-2-jkl",
        "legacy": ".tmp-lib-xyz",
    }
    for name in names.values():
        (tmp_path / name).write_text("")
    (tmp_path / "folder-entry").mkdir()
    week_ago = time.time() - 7 * 24 * 3600
    for key in ("old", "legacy"):
        os.utime(tmp_path / names[key], (week_ago, week_ago))
    assert sweep_temporaries(tmp_path, force=True) == 3
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {names["alive"], names["elsewhere"], "folder-entry"}


def test_a_put_sweeps_its_folder_once(root):
    cache = DiskCache("trust")
    folder = root / "trust"
    folder.mkdir(parents=True, mode=0o700)
    os.chmod(root, 0o700)
    stale = folder / f".tmp-{socket.gethostname()}-999999999-x"
    stale.write_text("")
    cache_module._swept.discard(str(folder))
    assert cache.put("cd" * 32, b"x")
    assert not stale.exists()


# --- what cache=false and config.cache_dir mean for every writer ------------------------

_SAMPLE = """
import sys
import numpy as np
import kiln as kl
if sys.argv[1]:
    kl.config.cache_dir = sys.argv[1]
with kl.Model() as m:
    mu = kl.Normal("mu", 0, 1)
    s = kl.HalfNormal("s", 1)
    kl.Normal("y", mu, s, observed=np.array([0.1, -0.4, 1.2, 0.3]))
    cov = s**2 * np.eye(2) + 0.5  # a Cholesky: one of kiln_numba's own kernels
    kl.MvNormal("v", mu=np.zeros(2), cov=cov, observed=np.array([0.3, -0.2]))
    idata = kl.sample(draws=100, tune=100, chains=1, random_seed=3, progressbar=False)
print(float(idata.posterior["mu"].mean()))
"""


def _numba_files() -> dict[str, int]:
    """Numba cache files inside the source tree, with their modification times."""
    found = {}
    for pattern in ("*.nbi", "*.nbc"):
        for path in (REPO / "packages").rglob(f"__pycache__/{pattern}"):
            found[str(path)] = path.stat().st_mtime_ns
    return found


def _run(
    script: str, argument: str, home: Path, flags: str, c_compiler: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("KILN_CACHE_DIR", "NUMBA_CACHE_DIR", "CC")
    }
    if not c_compiler:  # no C compiler on PATH: the Numba NUTS kernel runs
        env["PATH"] = os.path.dirname(sys.executable)
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        TMPDIR=str(home / "tmp"),
        KILN_FLAGS=flags,
        PYTHONDONTWRITEBYTECODE="1",
    )
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-c", "import os; os.umask(0o002)\n" + script, argument],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("c_compiler", [True, False], ids=["c-kernel", "numba-kernel"])
def test_cache_false_writes_nothing_anywhere(tmp_path, c_compiler):
    pytest.importorskip("kiln_numba")
    before = _numba_files()
    home = tmp_path / "home"
    done = _run(_SAMPLE, str(tmp_path / "root"), home, "cache=false", c_compiler)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "root").exists()
    assert [p for p in home.rglob("*") if p.is_file()] == []
    assert _numba_files() == before


def test_config_cache_dir_set_in_python_is_every_writers_and_private(tmp_path):
    pytest.importorskip("kiln_numba")
    before = _numba_files()
    home, root = tmp_path / "home", tmp_path / "root"
    first = _run(_SAMPLE, str(root), home, "shared_library=true", c_compiler=False)
    assert first.returncode == 0, first.stderr
    assert [p for p in home.rglob("*") if p.is_file()] == []
    assert _numba_files() == before
    names = {p.relative_to(root).parts[0] for p in root.iterdir()}
    assert {"stage1", "numba", "samplers"} <= names
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, (path, oct(mode))
    for kernels in (root / "numba" / "kernels", root / "samplers" / "numba"):
        assert any(kernels.rglob("*.nbi")), kernels  # kiln_numba's and the NUTS kernel's
    second = _run(_SAMPLE, str(root), home, "shared_library=true", c_compiler=False)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
