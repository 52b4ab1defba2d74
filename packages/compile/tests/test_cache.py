"""The on-disk cache layer, the Stage-1 cache in function(), the profile, the CLI."""

import json
import os
import shutil
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import kiln_graph.tensor as kt
from kiln_compile import (
    FAST_COMPILE,
    FAST_RUN,
    STAGE1,
    CacheWarning,
    Config,
    DiskCache,
    Mode,
    cache_info,
    clear_cache,
    config,
    function,
    prepare,
    stage1_key,
)
from kiln_compile import _cache as cache_module
from kiln_graph import Apply, KilnValueError, Op


@pytest.fixture(autouse=True)
def _no_memo():
    """Turn the memo off: these tests compile one graph again and again, for the disk caches."""
    with config.change(memo=False):
        yield


VM_RUN = FAST_RUN.with_linker("vm")

# A small model: the log density of a normal regression and its gradient.
MODEL = """
import json, sys
import numpy as np
import kiln_graph.tensor as kt
from kiln_compile import FAST_RUN, function, cache_stats
from kiln_compile._stage1 import code_fingerprint

def model():
    beta = kt.vector("beta", shape=(3,))
    log_sigma = kt.scalar("log_sigma")
    X = kt.constant(np.arange(12.0).reshape(4, 3) / 10)
    y = kt.constant(np.array([0.5, 1.0, -0.3, 2.0]))
    sigma = kt.exp(log_sigma)
    resid = (y - kt.dot(X, beta)) / sigma
    logp = kt.sum(-0.5 * resid**2 - kt.log(sigma)) - 0.5 * kt.sum(beta**2)
    return [beta, log_sigma], [logp, *kt.grad(logp, [beta, log_sigma])]
"""

SCRIPT = (
    MODEL
    + """
ins, outs = model()
f = function(ins, outs, mode=FAST_RUN.with_linker("vm"), profile=True)
res = f(np.array([0.1, -0.2, 0.3]), 0.2)
print(json.dumps({
    "cache": f.profile.cache,
    "note": f.profile.cache_note,
    "result": [np.asarray(r).tolist() for r in res],
    "stats": {k: vars(v) for k, v in cache_stats().items()},
    "code": code_fingerprint(FAST_RUN.rewrites),
}))
"""
)


def _model():
    namespace: dict = {}
    exec(MODEL, namespace)
    return namespace["model"]()


def _run_script(cache_dir, flags=None, script=SCRIPT):
    env = dict(os.environ, KILN_CACHE_DIR=str(cache_dir))
    env.pop("KILN_FLAGS", None)
    if flags:
        env["KILN_FLAGS"] = flags
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def _run_twice(cache_dir, script=SCRIPT):
    """Run ``script`` twice on ``cache_dir`` with the same rewriting code.

    The key includes a fingerprint of the rewriting code, so an edit of kiln's source
    between the two runs (a shared working tree) is a legitimate miss: retry then.
    """
    for _ in range(5):
        clear_cache(cache_dir)
        first = _run_script(cache_dir, script=script)
        second = _run_script(cache_dir, script=script)
        if first["code"] == second["code"]:
            return first, second
    pytest.skip("kiln's source kept changing between processes")


def _entries(cache_dir):
    d = Path(cache_dir) / "stage1"
    return sorted(d.glob("*.kc")) if d.is_dir() else []


VALUES = [np.array([0.1, -0.2, 0.3]), 0.2]


# --- the generic layer -----------------------------------------------------------------


def test_disk_cache_put_get_and_counters(tmp_path):
    cache = DiskCache("testns", root=tmp_path)
    key = "ab" * 32
    hits, misses = cache.stats.hits, cache.stats.misses
    assert cache.get(key) is None
    assert cache.put(key, b"payload \x00\xff")
    assert cache.get(key) == b"payload \x00\xff"
    assert (cache.stats.hits, cache.stats.misses) == (hits + 1, misses + 1)
    assert [p.name for p in (tmp_path / "testns").iterdir()] == [key + ".kc"]  # no temp left
    assert (tmp_path / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f59")
    assert cache.put(key, b"new")  # overwriting is atomic too
    assert cache.get(key) == b"new"


def test_a_root_whose_parent_folders_are_missing_is_made(tmp_path):
    """A new account has no ``~/.cache``: the root's parents are made, the root private."""
    root = tmp_path / "home" / ".cache" / "kiln"
    cache = DiskCache("testns", root=root)
    assert cache.put("cd" * 32, b"payload")
    assert cache.get("cd" * 32) == b"payload"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert (root / "CACHEDIR.TAG").exists()
    assert not (root.parent / "CACHEDIR.TAG").exists()


def test_disk_cache_validates_keys_and_namespaces(tmp_path):
    with pytest.raises(KilnValueError, match="namespace"):
        DiskCache("../up", root=tmp_path)
    cache = DiskCache("testns", root=tmp_path)
    for bad in ("../../etc/passwd", "ABCDEF0123456789", "short", 12):
        with pytest.raises(KilnValueError, match="hex digest"):
            cache.get(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "damage",
    ["truncate_header", "truncate_payload", "flip_payload", "flip_header", "empty", "version"],
)
def test_disk_cache_detects_and_discards_damaged_entries(tmp_path, damage):
    cache = DiskCache("testns", root=tmp_path)
    key = "cd" * 32
    payload = bytes(range(256)) * 8
    cache.put(key, payload)
    path = cache.path(key)
    blob = bytearray(path.read_bytes())
    if damage == "truncate_header":
        blob = blob[:20]
    elif damage == "truncate_payload":
        blob = blob[:-100]
    elif damage == "flip_payload":
        blob[-7] ^= 0xFF
    elif damage == "flip_header":
        blob[0] ^= 0xFF
    elif damage == "empty":
        blob = bytearray()
    else:  # an entry of another format version
        blob[8] += 1
    path.write_bytes(bytes(blob))
    corrupt = cache.stats.corrupt
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warning-free
        assert cache.get(key) is None
    assert cache.stats.corrupt == corrupt + 1
    assert not path.exists()


def test_unwritable_cache_warns_once_and_is_skipped(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cache = DiskCache("testns", root=blocker / "cache")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not cache.put("ef" * 32, b"x")
        assert not cache.put("ef" * 31 + "00", b"y")
    assert [w.category for w in caught] == [CacheWarning]
    assert "cannot write the cache folder" in str(caught[0].message)
    assert cache.get("ef" * 32) is None


def test_clear_and_info(tmp_path):
    stage1 = DiskCache("stage1", root=tmp_path)
    other = DiskCache("numba", root=tmp_path)
    stage1.put("01" * 32, b"a" * 10)
    stage1.put("02" * 32, b"b" * 10)
    other.put("03" * 32, b"c" * 100)
    (tmp_path / "numba" / "artefact.nbi").write_bytes(b"backend's own file")
    report = cache_info(tmp_path)
    assert report["root"] == str(tmp_path)
    assert report["namespaces"]["stage1"]["entries"] == 2
    assert report["namespaces"]["numba"]["entries"] == 2
    assert report["entries"] == 4
    assert report["bytes"] == sum(
        p.stat().st_size for p in tmp_path.rglob("*.*") if p.parent != tmp_path
    )
    assert clear_cache(tmp_path) == 4
    assert cache_info(tmp_path)["entries"] == 0
    assert (tmp_path / "CACHEDIR.TAG").exists()


def test_clear_in_a_foreign_folder_deletes_only_kiln_entries(tmp_path):
    (tmp_path / "mine.txt").write_text("user data")  # the root is not kiln's: no tag
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    DiskCache("stage1", root=tmp_path).put("04" * 32, b"entry")
    assert not (tmp_path / "CACHEDIR.TAG").exists()
    assert clear_cache(tmp_path) == 1
    assert (tmp_path / "mine.txt").exists() and (tmp_path / "notes" / "todo.txt").exists()
    assert not (tmp_path / "stage1").exists()


# --- the Stage-1 cache -----------------------------------------------------------------


def test_second_compile_of_the_same_structure_hits(tmp_path):
    with config.change(cache_dir=str(tmp_path)):
        ins, outs = _model()
        f1 = function(ins, outs, mode=VM_RUN, profile=True)
        ins2, outs2 = _model()  # new input objects, same structure
        f2 = function(ins2, outs2, mode=VM_RUN, profile=True)
    assert f1.profile.cache == "miss" and f2.profile.cache == "hit"
    assert f1.profile.cache_key == f2.profile.cache_key
    assert f2.profile.rewrites.phase_times == {}  # nothing was rewritten
    assert f2.inputs == tuple(ins2)
    for a, b in zip(f1(*VALUES), f2(*VALUES), strict=True):
        np.testing.assert_array_equal(a, b)
    # The same result as the unrewritten graph on the VM.
    ref = function(ins, outs, mode=Mode(rewrites=None, linker="vm"))(*VALUES)
    for a, b in zip(f2(*VALUES), ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert len(_entries(tmp_path)) == 1


def test_a_new_process_hits_the_cache(tmp_path):
    first, second = _run_twice(tmp_path)
    assert first["cache"] == "miss" and first["stats"]["stage1"]["writes"] == 1
    assert second["cache"] == "hit" and second["stats"]["stage1"]["hits"] == 1
    assert second["stats"]["stage1"]["writes"] == 0
    np.testing.assert_allclose(
        np.concatenate([np.ravel(r) for r in second["result"]]),
        np.concatenate([np.ravel(r) for r in first["result"]]),
        rtol=1e-15,
    )


def test_a_models_data_is_not_stored_in_its_stage1_entry(tmp_path):
    """The entry names the function's large constants by digest; a new process has them."""
    script = SCRIPT.replace(
        "np.arange(12.0).reshape(4, 3) / 10", "np.arange(30000.0).reshape(10000, 3) / 1e5"
    ).replace("np.array([0.5, 1.0, -0.3, 2.0])", "np.linspace(-1.0, 2.0, 10000)")
    assert script != SCRIPT
    first, second = _run_twice(tmp_path, script)
    assert first["cache"] == "miss" and second["cache"] == "hit"  # the hit writes nothing
    sizes = [p.stat().st_size for p in _entries(tmp_path)]
    assert len(sizes) == 1 and sizes[0] < 20_000  # X and y are 320,000 bytes
    np.testing.assert_allclose(
        np.concatenate([np.ravel(r) for r in second["result"]]),
        np.concatenate([np.ravel(r) for r in first["result"]]),
        rtol=1e-15,
    )


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage_pickle"])
def test_a_damaged_stage1_entry_is_discarded_and_rebuilt(tmp_path, damage):
    with config.change(cache_dir=str(tmp_path)):
        ins, outs = _model()
        f = function(ins, outs, mode=VM_RUN, profile=True)
        expected = f(*VALUES)
        (path,) = _entries(tmp_path)
        blob = path.read_bytes()
        if damage == "truncate":
            path.write_bytes(blob[: len(blob) // 2])
        elif damage == "flip":
            path.write_bytes(blob[:-10] + bytes(b ^ 0x5A for b in blob[-10:]))
        else:  # a well-formed entry whose payload is not a graph
            STAGE1.put(path.stem, b"\x80\x05not a pickle at all")
        corrupt = STAGE1.stats.corrupt
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ins2, outs2 = _model()
            g = function(ins2, outs2, mode=VM_RUN, profile=True)
        assert g.profile.cache == "miss"
        assert STAGE1.stats.corrupt == corrupt + 1
        if damage == "garbage_pickle":
            assert "discarded a damaged entry" in g.profile.cache_note
        for a, b in zip(g(*VALUES), expected, strict=True):
            np.testing.assert_array_equal(a, b)
        ins3, outs3 = _model()  # rebuilt: the next compile hits again
        assert function(ins3, outs3, mode=VM_RUN, profile=True).profile.cache == "hit"


def _run_concurrently(cache_dir, n=2):
    env = dict(os.environ, KILN_CACHE_DIR=str(cache_dir))
    env.pop("KILN_FLAGS", None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(n)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * n, [o[1] for o in outputs]
    return [json.loads(o[0]) for o in outputs]


def test_two_processes_compiling_at_once_both_succeed(tmp_path):
    for _ in range(5):
        clear_cache(tmp_path)
        results = _run_concurrently(tmp_path)
        assert results[0]["result"] == results[1]["result"]
        if results[0]["code"] == results[1]["code"]:  # else kiln's source changed meanwhile
            break
    (path,) = _entries(tmp_path)  # one valid entry, no temporary files left
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert DiskCache("stage1", root=tmp_path).get(path.stem) is not None
    after = _run_script(tmp_path)
    assert after["cache"] == "hit" or after["code"] != results[0]["code"]


def test_unwritable_cache_dir_compiles_with_one_warning(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    x = kt.vector("x")
    with config.change(cache_dir=str(blocker / "cache")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = function([x], kt.exp(x) + 1, mode=VM_RUN)
            g = function([x], kt.log1p(kt.exp(x)), mode=VM_RUN)
    assert [w.category for w in caught] == [CacheWarning]
    np.testing.assert_allclose(f([0.0]), [2.0])
    np.testing.assert_allclose(g([0.0]), [np.log(2.0)])


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can write read-only folders"
)
def test_read_only_cache_dir_compiles_with_one_warning(tmp_path):
    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(0o555)
    x = kt.vector("x")
    try:
        with config.change(cache_dir=str(root)):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                f = function([x], kt.exp(x) * 3, mode=VM_RUN)
                function([x], kt.exp(x) * 4, mode=VM_RUN)
    finally:
        root.chmod(0o755)
    assert [w.category for w in caught] == [CacheWarning]
    np.testing.assert_allclose(f([0.0]), [3.0])


def test_cache_false_disables_caching(tmp_path):
    assert Config.from_flags("cache=false").cache is False
    assert Config().cache is True
    x = kt.vector("x")
    with config.change(cache_dir=str(tmp_path), cache=False):
        f = function([x], kt.exp(x) + 2, mode=VM_RUN, profile=True)
        g = function([x], kt.exp(x) + 2, mode=VM_RUN, profile=True)
    assert f.profile.cache == g.profile.cache == "disabled"
    assert not any(tmp_path.iterdir())
    assert "Stage-1 cache: disabled" in f.profile.summary()
    assert _run_script(tmp_path, flags="cache=false")["cache"] == "disabled"
    assert not any(tmp_path.iterdir())


def test_clear_empties_the_cache(tmp_path):
    with config.change(cache_dir=str(tmp_path)):
        ins, outs = _model()
        function(ins, outs, mode=VM_RUN)
        function(ins, outs, mode=FAST_COMPILE)
        assert cache_info()["namespaces"]["stage1"]["entries"] == 2
        assert clear_cache() == 2
        assert cache_info()["entries"] == 0
        ins, outs = _model()
        assert function(ins, outs, mode=VM_RUN, profile=True).profile.cache == "miss"


def _kiln_command():
    script = Path(sys.executable).with_name("kiln")
    return [str(script)] if script.exists() else [sys.executable, "-m", "kiln._cli"]


def test_cli_cache_info_and_clear(tmp_path):
    _run_script(tmp_path)
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path))
    info = subprocess.run(
        [*_kiln_command(), "cache", "info", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(info.stdout)
    assert report["root"] == str(tmp_path) and report["namespaces"]["stage1"]["entries"] == 1
    text = subprocess.run(
        [*_kiln_command(), "cache", "info"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "stage1" in text and "1 entries" in text
    cleared = subprocess.run(
        [*_kiln_command(), "cache", "clear"], env=env, capture_output=True, text=True, check=True
    )
    assert "removed 1 file" in cleared.stdout
    assert _entries(tmp_path) == []
    bad = subprocess.run([*_kiln_command(), "cache", "frobnicate"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_umbrella_cache_module():
    import kiln

    assert kiln.cache.info is cache_info and kiln.cache.clear is clear_cache


def test_key_depends_on_structure_query_and_constants():
    def key(build, query=FAST_RUN.rewrites, dtype="float64"):
        x = kt.vector("x", dtype=dtype)
        return stage1_key(prepare([x], [build(x)]), query)

    base = key(lambda x: kt.exp(x) * 2.0)
    assert key(lambda x: kt.exp(x) * 2.0) == base  # new input objects, same key
    assert key(lambda x: kt.exp(x) * 3.0) != base  # a constant's value
    assert key(lambda x: kt.exp(x) * 2.0, dtype="float32") != base  # an input type
    assert key(lambda x: kt.log(x) * 2.0) != base  # an op
    assert key(lambda x: kt.exp(x) * 2.0, FAST_RUN.excluding("stabilize").rewrites) != base
    assert key(lambda x: kt.exp(x) * 2.0, FAST_COMPILE.rewrites) != base


def test_changed_query_is_a_miss(tmp_path):
    with config.change(cache_dir=str(tmp_path)):
        ins, outs = _model()
        assert function(ins, outs, mode=VM_RUN, profile=True).profile.cache == "miss"
        mode = VM_RUN.excluding("stabilize")
        assert function(ins, outs, mode=mode, profile=True).profile.cache == "miss"
        assert function(ins, outs, mode=mode, profile=True).profile.cache == "hit"


def test_unpicklable_op_is_compiled_but_not_cached(tmp_path):
    class Twice(Op):  # a local class: pickle cannot find it, so the graph is not stored
        __props__ = ()

        def make_node(self, x):
            x = kt.as_tensor(x)
            return Apply.create(self, [x], [x.type])

        def perform(self, node, inputs, outputs):
            outputs[0] = inputs[0] * 2

    x = kt.vector("x")
    with config.change(cache_dir=str(tmp_path)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            f = function([x], Twice()(kt.exp(x)), mode=VM_RUN, profile=True)
    assert f.profile.cache == "miss" and f.profile.cache_note.startswith("not stored")
    assert _entries(tmp_path) == []
    np.testing.assert_allclose(f([0.0]), [2.0])


# --- the profile -----------------------------------------------------------------------


def test_profile_summary_answers_why_startup_is_slow(tmp_path):
    with config.change(cache_dir=str(tmp_path)):
        ins, outs = _model()
        f = function(ins, outs, mode=VM_RUN, profile=True)
        f(*VALUES)
        f(*VALUES)
        ins2, outs2 = _model()
        g = function(ins2, outs2, mode=VM_RUN, profile=True)
    prof = f.profile
    assert set(prof.compile_times) == {"prepare", "rewrite", "link"}
    assert prof.first_call_time is not None and prof.calls == 2
    assert 0 < prof.first_call_time <= prof.call_time
    assert prof.nodes["prepared"] > prof.nodes["rewritten"] > 0
    assert "store" in prof.cache_times and "key" in prof.cache_times
    text = prof.summary()
    for needle in (
        "mode fast_run",
        "linker vm",
        "prepare",
        "Stage 1",
        "Stage 2",
        "Stage-1 cache: miss",
        "canonicalize",
        "stabilize",
        "top rewrites by time",
        "nodes: prepared",
        "first call",
        "later calls",
    ):
        assert needle in text, needle
    hit = g.profile.summary()
    assert "Stage-1 cache: hit" in hit and "load" in hit
    assert "first call" not in hit  # not called yet
    g(*VALUES)
    assert "first call" in g.profile.summary() and "later calls" not in g.profile.summary()


def test_config_profile_profiles_every_function():
    x = kt.vector("x")
    assert function([x], x + 1, mode=FAST_COMPILE).profile is None
    with config.change(profile=True):
        f = function([x], x + 1, mode=FAST_COMPILE)
    assert f.profile is not None and f.profile.cache in ("hit", "miss")
    no_rewrites = function([x], x + 1, mode=Mode(rewrites=None, linker="vm"), profile=True)
    assert "Stage-1 cache: none" in no_rewrites.profile.summary()


def test_test_suite_cache_is_not_the_home_cache():
    assert Path(config.cache_dir) != Path.home() / ".cache" / "kiln"
    assert os.environ["KILN_CACHE_DIR"] == config.cache_dir


@pytest.fixture(autouse=True)
def _forget_unwritable_roots():
    yield
    cache_module._unwritable.clear()


def test_tmp_dirs_cleanup_helper(tmp_path):
    # clear() on a missing root is a no-op, not an error.
    assert clear_cache(tmp_path / "missing") == 0
    assert cache_info(tmp_path / "missing")["entries"] == 0
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_rewrite_cached_stores_then_loads_the_rewritten_graph() -> None:
    """``rewrite_cached`` goes through the Stage-1 cache: a miss, then a hit, one graph."""
    from kiln_compile import cache_stats, rewrite_cached
    from kiln_graph import format_graph
    from kiln_rewrite import STABILIZE_QUERY

    x = kt.vector("x_rewrite_cached")
    cost = kt.sum(kt.log(1 + kt.exp(x * 3.25)))
    stats = cache_stats().get("stage1")
    hits, misses = (stats.hits, stats.misses) if stats else (0, 0)
    (first,) = rewrite_cached([x], [cost], STABILIZE_QUERY)
    (second,) = rewrite_cached([x], [cost], STABILIZE_QUERY)
    stats = cache_stats()["stage1"]
    assert (stats.hits, stats.misses) == (hits + 1, misses + 1)
    assert format_graph(first) == format_graph(second)
    assert "softplus" in format_graph(second)


def test_an_entry_given_in_parts_is_written_without_joining_them(tmp_path) -> None:
    """A Stage-1 entry's data goes to disk part by part: no joined copy in memory."""
    import tracemalloc

    big = np.random.default_rng(0).normal(size=10**6)  # 8 MB
    parts = [b"head", memoryview(big.view(np.uint8)), b"tail"]
    cache = DiskCache("testns", root=tmp_path)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert cache.put("ab" * 32, parts)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert cache.get("ab" * 32) == b"head" + big.tobytes() + b"tail"
    assert peak < big.nbytes / 4, peak
