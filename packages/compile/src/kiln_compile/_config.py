"""The one configuration object, with defaults from the ``KILN_FLAGS`` environment variable."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kiln_graph import KilnValueError
from kiln_graph.helpers import collect_and_freeze


def _default_cache_dir() -> str:
    return os.environ.get("KILN_CACHE_DIR") or str(Path.home() / ".cache" / "kiln")


@dataclasses.dataclass
class Config:
    """kiln's settings.

    Attributes
    ----------
    linker
        Backend used by modes that do not name one: ``"auto"`` (Numba when installed,
        otherwise the Python VM) or a linker name such as ``"vm"``.
    cache_dir
        Root of the on-disk caches (``KILN_CACHE_DIR`` or ``~/.cache/kiln``).
    warn_fallback
        Warn once when ``"auto"`` falls back to the Python VM.
    cache
        Use the on-disk caches (``KILN_FLAGS=cache=false`` turns them off).
    profile
        Profile every compiled function, as if ``function(..., profile=True)``.
    memo
        Reuse, within this process, the rewritten graph and linked callable of an
        identical function compiled before (:mod:`kiln_compile._memo`).
    shared_library
        Numba backend: link each compiled function's machine code into a shared library
        that a later process loads in about a millisecond, without importing Numba
        (Linux on x86-64; ``KILN_FLAGS=shared_library=false`` leaves every function to
        Numba's own loader).
    torch_device
        PyTorch backend: the device the compiled functions compute on (``"cpu"``, or
        ``"cuda"``, ``"cuda:1"``, ``"mps"`` where torch has it). Read at each call.
    torch_compile
        PyTorch backend: run each function through ``torch.compile`` (inductor; its cache
        under the cache root) rather than eagerly. Slow to compile (tens of seconds
        cold), faster per call. Read at each call.
    fast_exit
        At the process's exit, collect the garbage once and freeze the rest
        (:func:`kiln_graph.helpers.collect_and_freeze`), so that the interpreter's own
        collections while it tears its modules down skip it: 0.3 s off the exit of a
        process that compiled with Numba. A cycle that becomes garbage only during that
        teardown is then left to the operating system without its ``__del__`` being
        run; ``KILN_FLAGS=fast_exit=false`` keeps Python's own exit. Read at exit.
    torch_threads
        PyTorch backend: the threads torch computes a call with (set around each call,
        torch's own setting restored after). ``0`` (the default) decides per graph: one
        thread when no input or constant of the graph has a million elements or more
        (torch's worker threads cost more than they save on such arrays: on two cores, M3
        of the benchmarks ran 27x slower per call on two threads, M1, M2 and M4 within 8%
        of one), torch's own count otherwise. Read at each call.
    """

    linker: str = "auto"
    cache_dir: str = dataclasses.field(default_factory=_default_cache_dir)
    warn_fallback: bool = True
    cache: bool = True
    profile: bool = False
    memo: bool = True
    shared_library: bool = True
    fast_exit: bool = True
    torch_device: str = "cpu"
    torch_compile: bool = False
    torch_threads: int = 0

    @classmethod
    def from_flags(cls, flags: str | None) -> Config:
        """Build a config from ``"name=value,name=value"`` (the ``KILN_FLAGS`` syntax)."""
        config = cls()
        if not flags:
            return config
        for item in flags.split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, value = item.partition("=")
            if not sep:
                raise KilnValueError(f"KILN_FLAGS: expected name=value, got {item!r}")
            config.set(name.strip(), value.strip())
        return config

    def set(self, name: str, value: Any) -> None:
        """Set one setting by name, converting strings to the setting's type."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        if name not in fields:
            raise KilnValueError(f"unknown kiln setting {name!r}; valid settings: {sorted(fields)}")
        current = getattr(self, name)
        if isinstance(current, bool) and isinstance(value, str):
            if value.lower() not in ("true", "false", "1", "0"):
                raise KilnValueError(f"setting {name}: expected true/false, got {value!r}")
            value = value.lower() in ("true", "1")
        elif isinstance(current, int) and not isinstance(current, bool):
            try:
                value = int(value)
            except (TypeError, ValueError):
                message = f"setting {name}: expected an integer, got {value!r}"
                raise KilnValueError(message) from None
        setattr(self, name, value)

    @contextlib.contextmanager
    def change(self, **settings: Any) -> Iterator[Config]:
        """Temporarily change settings inside a ``with`` block.

        Examples
        --------
        >>> with config.change(linker="vm"):  # doctest: +SKIP
        ...     f = kiln.function([x], y)
        """
        old = {name: getattr(self, name) for name in settings}
        try:
            for name, value in settings.items():
                self.set(name, value)
            yield self
        finally:
            for name, value in old.items():
                setattr(self, name, value)


config = Config.from_flags(os.environ.get("KILN_FLAGS"))


def _at_exit() -> None:
    if config.fast_exit:
        collect_and_freeze()


# Registered when kiln is imported: it runs after the exit handlers registered later
# (the user's, the shared libraries' builds), before those registered earlier.
atexit.register(_at_exit)
