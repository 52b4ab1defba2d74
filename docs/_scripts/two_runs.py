"""Run profile_model.py twice in new processes with one empty cache; show both caches."""

import os
import subprocess
import sys
import tempfile

KEEP = ("compile:", "rewrite ", "link ", "Stage-1 cache", "Stage-2 cache", "first call")

with tempfile.TemporaryDirectory() as cache:
    env = dict(os.environ, KILN_CACHE_DIR=cache)
    for run in ("first", "second"):
        out = subprocess.run(
            [sys.executable, "profile_model.py"], env=env, capture_output=True, text=True
        ).stdout
        print(f"--- {run} run, a new process")
        for line in out.splitlines():
            if line.lstrip().startswith(KEEP):
                print(line.replace(cache, "$KILN_CACHE_DIR"))
    print("--- kiln cache info")
    info = subprocess.run(
        [sys.executable, "-m", "kiln._cli", "cache", "info"],
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    print(info.replace(cache, "$KILN_CACHE_DIR").rstrip())
    print("--- kiln cache clear")
    cleared = subprocess.run(
        [sys.executable, "-m", "kiln._cli", "cache", "clear"],
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    print(cleared.replace(cache, "$KILN_CACHE_DIR").rstrip())
