"""Compile and call profiles of a function."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from kiln_rewrite import RewriteStats


@dataclasses.dataclass
class Profile:
    """Timings of one compiled function.

    ``compile_times`` maps a stage (``"prepare"``, ``"rewrite"``, ``"link"``) to
    seconds; ``calls`` and ``call_time`` count the calls and their total seconds;
    ``op_times`` (filled by linkers that support it) maps an Op's name to the seconds
    spent in it across calls.
    """

    compile_times: dict[str, float] = dataclasses.field(default_factory=dict)
    calls: int = 0
    call_time: float = 0.0
    op_times: dict[str, float] = dataclasses.field(default_factory=lambda: defaultdict(float))
    op_calls: dict[str, int] = dataclasses.field(default_factory=lambda: defaultdict(int))
    rewrites: RewriteStats = dataclasses.field(default_factory=RewriteStats)

    def summary(self) -> str:
        """Return a table of the compile stages, the calls and the slowest Ops."""
        lines = ["kiln function profile", "  compile:"]
        for stage, seconds in self.compile_times.items():
            lines.append(f"    {stage:<12} {seconds * 1e3:10.3f} ms")
        if self.rewrites.phase_times:
            lines.append(self.rewrites.summary())
        per_call = self.call_time / self.calls * 1e6 if self.calls else 0.0
        lines.append(f"  calls: {self.calls}, total {self.call_time:.6f} s, {per_call:.1f} us/call")
        if self.op_times:
            lines.append("  ops (total time, calls):")
            ranked = sorted(self.op_times.items(), key=lambda kv: -kv[1])
            for name, seconds in ranked[:20]:
                lines.append(f"    {seconds * 1e3:10.3f} ms {self.op_calls[name]:8d}  {name}")
        return "\n".join(lines)
