"""``config.fast_exit``: at exit the garbage is collected once and the rest frozen."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import atexit, gc

    before = gc.get_freeze_count()  # (the interpreter may freeze a few objects itself)
    # Registered before kiln's handler, so it runs after it.
    atexit.register(lambda: print("frozen", gc.get_freeze_count() > before + 1000, flush=True))

    import kiln_compile  # noqa: F401

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            print("finalized", flush=True)

    gc.disable()  # the cycle stays garbage until the exit handler collects it
    Cycle()
    """
)


def _run(flags: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "KILN_FLAGS"}
    if flags is not None:
        env["KILN_FLAGS"] = flags
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.split("\n")[:-1]


def test_the_exit_collects_the_garbage_then_freezes_the_rest() -> None:
    assert _run(None) == ["finalized", "frozen True"]


def test_fast_exit_false_keeps_pythons_own_exit() -> None:
    lines = _run("fast_exit=false")
    assert lines[0] == "frozen False"
    assert lines[1:] == ["finalized"]  # collected by the interpreter's own teardown
