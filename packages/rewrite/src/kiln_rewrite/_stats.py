"""Statistics of one rewriting run: time per phase and per rewrite, applications, sizes."""

from __future__ import annotations

import dataclasses
from collections import defaultdict


@dataclasses.dataclass
class RewriteStats:
    """What the rewriter did to one graph.

    ``phase_times`` maps each phase to seconds; ``applied`` / ``tried`` / ``times`` map
    each rewrite's name to how often it fired, how often it was tried, and the seconds
    spent in it; ``nodes`` maps ``"before"`` and each phase to the node count after it.
    """

    phase_times: dict[str, float] = dataclasses.field(default_factory=dict)
    applied: dict[str, int] = dataclasses.field(default_factory=lambda: defaultdict(int))
    tried: dict[str, int] = dataclasses.field(default_factory=lambda: defaultdict(int))
    times: dict[str, float] = dataclasses.field(default_factory=lambda: defaultdict(float))
    nodes: dict[str, int] = dataclasses.field(default_factory=dict)

    def record_try(self, name: str, seconds: float, fired: bool) -> None:
        """Count one call of rewrite ``name`` that took ``seconds``."""
        self.tried[name] += 1
        self.times[name] += seconds
        if fired:
            self.applied[name] += 1

    def summary(self, top: int = 10) -> str:
        """Return the phase times, node counts and the top rewrites by time and by count."""
        lines = ["  rewriting (Stage 1):"]
        for phase, seconds in self.phase_times.items():
            n = self.nodes.get(phase)
            lines.append(
                f"    {phase:<14} {seconds * 1e3:9.3f} ms" + (f"  -> {n} nodes" if n else "")
            )
        if "before" in self.nodes:
            lines.append(f"    nodes before rewriting: {self.nodes['before']}")
        by_time = sorted(self.times.items(), key=lambda kv: -kv[1])[:top]
        if by_time:
            lines.append("    top rewrites by time (ms, applied/tried):")
            for name, seconds in by_time:
                lines.append(
                    f"      {seconds * 1e3:9.3f}  {self.applied.get(name, 0):6d}/"
                    f"{self.tried[name]:<6d} {name}"
                )
        by_count = sorted(((n, c) for n, c in self.applied.items() if c), key=lambda kv: -kv[1])[
            :top
        ]
        if by_count:
            lines.append("    top rewrites by applications:")
            for name, count in by_count:
                lines.append(f"      {count:8d}  {name}")
        return "\n".join(lines)
