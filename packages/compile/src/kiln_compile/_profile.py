"""Compile and call profiles of a function: where the time to first result goes."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from kiln_rewrite import RewriteStats


@dataclasses.dataclass
class Profile:
    """Timings of one compiled function, from ``function()`` to its later calls.

    Attributes
    ----------
    compile_times
        Seconds per compile stage: ``"prepare"``, ``"rewrite"`` (Stage 1, cache lookup
        included) and ``"link"`` (Stage 2, loading the backend's package included).
    rewrites
        What the rewriter did (phase times, node counts, per-rewrite times and
        applications); empty when the Stage-1 cache held the rewritten graph.
    cache
        The Stage-1 cache outcome: ``"hit"``, ``"miss"``, ``"disabled"``
        (``config.cache`` is off), ``"none"`` (the mode does not rewrite) or ``"memo"``
        (the same function was compiled earlier in this process: nothing was redone).
    cache_key, cache_note, cache_times
        The entry's key, what happened to it beyond hit / miss (a damaged entry
        discarded, a graph not stored), and seconds spent computing the key
        (``"key"``), loading the graph (``"load"``), looking it up (``"lookup"``) and
        storing it (``"store"``).
    nodes
        Node counts: ``"prepared"`` and ``"rewritten"``.
    stage2
        Filled by the linker: its Stage-2 cache outcome. The Numba linker sets
        ``"cache"`` (``"hit"``: machine code loaded from disk, no LLVM; ``"miss"``:
        compiled and stored; ``"memory"``: already compiled in this process;
        ``"disabled"``, ``"unwritable"`` or ``"uncacheable"``: compiled, not stored),
        ``"first_call_s"`` (the first call, where Numba compiles or loads), ``"key"``,
        ``"module"`` (the generated module's file), ``"note"`` (damaged files rebuilt)
        and ``"loader"`` (``"shared library"`` where the machine code was mapped from its
        shared library, without Numba).
    first_call_time
        Seconds of the first call (it may pay for lazy compilation); ``None`` before it.
    calls, call_time
        Number of calls and their total seconds (the first call included).
    op_times, op_calls
        Filled by linkers that support it: seconds and calls per Op across calls.
    mode, linker
        The mode and the backend the function was compiled with.
    """

    compile_times: dict[str, float] = dataclasses.field(default_factory=dict)
    calls: int = 0
    call_time: float = 0.0
    op_times: dict[str, float] = dataclasses.field(default_factory=lambda: defaultdict(float))
    op_calls: dict[str, int] = dataclasses.field(default_factory=lambda: defaultdict(int))
    rewrites: RewriteStats = dataclasses.field(default_factory=RewriteStats)
    cache: str = "none"
    cache_key: str = ""
    cache_note: str = ""
    cache_times: dict[str, float] = dataclasses.field(default_factory=dict)
    nodes: dict[str, int] = dataclasses.field(default_factory=dict)
    stage2: dict[str, Any] = dataclasses.field(default_factory=dict)
    first_call_time: float | None = None
    mode: str = ""
    linker: str = ""

    def record_call(self, seconds: float) -> None:
        """Count one call that took ``seconds``."""
        if self.calls == 0:
            self.first_call_time = seconds
        self.calls += 1
        self.call_time += seconds

    def summary(self) -> str:
        """Return the whole profile as text: compile stages, Stage-1 cache, rewriting, calls.

        One printout answers "why does this take a while to start?": time to prepare,
        rewrite (or load from the cache) and link, the slowest phases and rewrites, and
        the first call apart from the later ones.
        """
        head = "kiln function profile"
        if self.mode or self.linker:
            head += f" (mode {self.mode or '?'}, linker {self.linker or '?'})"
        total = sum(self.compile_times.values())
        lines = [head, f"  compile: {total * 1e3:.3f} ms"]
        labels = {"rewrite": "Stage 1", "link": "Stage 2"}
        for stage, seconds in self.compile_times.items():
            label = f"  ({labels[stage]})" if stage in labels else ""
            lines.append(f"    {stage:<12} {seconds * 1e3:10.3f} ms{label}")
        lines.append(self._cache_line())
        if self.stage2:
            lines.append(self._stage2_line())
        if self.nodes:
            counts = ", ".join(f"{k} {v}" for k, v in self.nodes.items())
            lines.append(f"  nodes: {counts}")
        if self.rewrites.phase_times:
            lines.append(self.rewrites.summary())
        lines.extend(self._call_lines())
        if self.op_times:
            lines.append("  ops (total time, calls):")
            ranked = sorted(self.op_times.items(), key=lambda kv: -kv[1])
            for name, seconds in ranked[:20]:
                lines.append(f"    {seconds * 1e3:10.3f} ms {self.op_calls[name]:8d}  {name}")
        return "\n".join(lines)

    def _cache_line(self) -> str:
        times = ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in self.cache_times.items())
        if self.cache == "hit":
            text = "hit: the rewritten graph was loaded, no rewriting"
        elif self.cache == "miss":
            text = "miss: rewritten" + (", stored" if "store" in self.cache_times else "")
        elif self.cache == "disabled":
            text = "disabled (config.cache is off)"
        elif self.cache == "memo":
            text = "memo: compiled earlier in this process (no rewriting, no linking)"
        else:
            text = "none (the mode runs no rewrites)"
        parts = [text]
        if self.cache_note:
            parts.append(self.cache_note)
        if times:
            parts.append(times)
        if self.cache_key:
            parts.append(f"key {self.cache_key[:16]}")
        return "  Stage-1 cache: " + "; ".join(parts)

    def _stage2_line(self) -> str:
        info = self.stage2
        parts = [str(info.get("cache", "?"))]
        if "first_call_s" in info:
            parts.append(f"first call {info['first_call_s'] * 1e3:.3f} ms")
        for name in ("loader", "note", "module"):
            if info.get(name):
                parts.append(str(info[name]))
        if info.get("key"):
            parts.append(f"key {str(info['key'])[:16]}")
        return "  Stage-2 cache: " + "; ".join(parts)

    def _call_lines(self) -> list[str]:
        lines = [f"  calls: {self.calls}, total {self.call_time:.6f} s"]
        if self.first_call_time is None:
            return lines
        lines.append(f"    first call   {self.first_call_time * 1e3:10.3f} ms")
        later = self.calls - 1
        if later:
            rest = self.call_time - self.first_call_time
            lines.append(
                f"    later calls  {rest / later * 1e6:10.1f} us/call over {later} call(s)"
            )
        return lines
