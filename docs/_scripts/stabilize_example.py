"""log(1 + exp(x)) and its gradient in float64, with and without the stabilize phase."""

import numpy as np

import kiln as kl
import kiln.tensor as kt

x = kt.vector("x")
y = kt.log(1 + kt.exp(x))  # the term a Bernoulli likelihood with a logit holds
dy = kl.grad(kt.sum(y), x)

naive = kl.function([x], [y, dy], mode=kl.FAST_RUN.excluding("stabilize"))
stable = kl.function([x], [y, dy])  # the default mode, FAST_RUN

print("without stabilize:")
kl.dprint(naive.outputs)
print("with stabilize:")
kl.dprint(stable.outputs)

values = np.array([-40.0, 0.0, 40.0, 800.0])
with np.errstate(over="ignore", invalid="ignore"):
    (y0, g0), (y1, g1) = naive(values), stable(values)
print(f"\n{'':>8} {'without stabilize':^32} {'with stabilize':^32}")
print(f"{'x':>8} {'y':>16}{'dy/dx':>16} {'y':>16}{'dy/dx':>16}")
for row in zip(values, y0, g0, y1, g1, strict=True):
    print(f"{row[0]:8.1f} " + " ".join(f"{v:15.8g}" for v in row[1:]))
