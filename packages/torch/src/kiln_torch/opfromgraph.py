"""OpFromGraph on torch: its inner graph generated as a program of its own, called inline.

The inner program is generated once when linking (like the outer one) and called with
the outer values; it reads its constants on the device of its first tensor argument.
"""

from __future__ import annotations

from typing import Any

import torch

from kiln_graph import Apply, OpFromGraph
from kiln_torch._convert import to_device
from kiln_torch._funcify import TorchImpl, torch_funcify


@torch_funcify.register(OpFromGraph)
def torch_funcify_OpFromGraph(op: OpFromGraph, node: Apply) -> TorchImpl:  # noqa: N802
    """Run the inner graph's program on the outer values."""
    from kiln_torch._program import TorchProgram

    inner = TorchProgram(op.inner_inputs, op.inner_outputs)
    multiple = len(op.inner_outputs) > 1
    bound: dict[torch.device, Any] = {}

    def program_on(device: torch.device) -> Any:
        found = bound.get(device)
        if found is None:

            def to_dev(value: Any, dtype: str | None) -> Any:
                return to_device(value, dtype, device)

            namespace: dict[str, Any] = {"to_device": to_dev}
            for name, value in inner.constants.items():
                namespace[name] = to_device(value, str(value.dtype), device)
            found = bound[device] = inner.bind(namespace)
        return found

    def opfromgraph(*args: Any) -> Any:
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        results = [
            r if isinstance(r, torch.Tensor) else to_device(r, None, device)
            for r in program_on(device)(*args)
        ]
        return tuple(results) if multiple else results[0]

    return opfromgraph
