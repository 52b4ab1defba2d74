"""The prepared graph of one function: its inputs, outputs and shared-variable updates."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from kiln_graph import Apply, Constant, Variable, schedule, toposort


class FunctionGraph:
    """An immutable description of what one compiled function computes.

    ``inputs`` are the explicit inputs followed by the shared variables the graph
    reads; ``outputs`` are the requested outputs followed by one new value per entry
    of ``update_targets`` (the shared variables written after each call).
    """

    __slots__ = (
        "inputs",
        "outputs",
        "n_explicit",
        "update_targets",
        "_digest",
        "_nodes",
        "_constants",
    )

    def __init__(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        n_explicit: int,
        update_targets: Sequence[Variable] = (),
    ) -> None:
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.n_explicit = n_explicit
        self.update_targets = tuple(update_targets)
        self._digest: str | None = None
        self._nodes: list[Apply] | None = None
        self._constants: tuple[Constant, ...] = ()

    @property
    def n_outputs(self) -> int:
        """Number of requested outputs (excluding updates)."""
        return len(self.outputs) - len(self.update_targets)

    @property
    def nodes(self) -> list[Apply]:
        """The Apply nodes in the order programs run them (:func:`kiln_graph.schedule`)."""
        if self._nodes is None:
            self._nodes = schedule(self.outputs, stop_at=self.inputs)
        return list(self._nodes)

    def with_outputs(self, outputs: Sequence[Variable]) -> FunctionGraph:
        """Return the same function with ``outputs`` (e.g. rewritten) in place of these."""
        return FunctionGraph(self.inputs, outputs, self.n_explicit, self.update_targets)

    @property
    def digest(self) -> str:
        """Structural hash of the function with inputs numbered by position.

        Equal for the same computation built in any process, whatever the inputs'
        names or identities.
        """
        if self._digest is None:
            h = hashlib.sha256()
            position = {v: i for i, v in enumerate(self.inputs)}
            memo: dict[Variable, bytes] = {}
            constants: dict[Constant, None] = {}

            def key(v: Variable) -> bytes:
                if v in position:
                    return (
                        b"in"
                        + str(position[v]).encode()
                        + v.type.__class__.__name__.encode()
                        + repr(v.type.key()).encode()
                    )
                if v.owner is None:
                    if isinstance(v, Constant):
                        constants[v] = None
                    return v.digest_bytes
                return memo[v]

            for node in toposort(self.outputs, stop_at=self.inputs):
                n = hashlib.sha256(node.op.digest_bytes)
                for i in node.inputs:
                    n.update(key(i))
                d = n.digest()
                for j, o in enumerate(node.outputs):
                    memo[o] = d + str(j).encode()
            for o in self.outputs:
                h.update(key(o))
            h.update(str((len(self.inputs), self.n_explicit, len(self.update_targets))).encode())
            self._digest, self._constants = h.hexdigest(), tuple(constants)
        return self._digest

    @property
    def constants(self) -> tuple[Constant, ...]:
        """The constants the function's graph reads (its digest covers their values)."""
        if self._digest is None:
            _ = self.digest  # the digest's traversal finds them
        return self._constants
