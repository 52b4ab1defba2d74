"""Compile eight schools' log-density and gradient with profiling on; print the profile."""

import kiln as kl
from eight_schools import build

model = build()
with kl.config.change(profile=True):  # or: KILN_FLAGS=profile=true python ...
    compiled = model.logp_dlogp_function()  # what kl.sample compiles for NUTS
x = compiled.initial_point(seed=0)
for _ in range(1000):
    compiled.logp_dlogp(x)
print(compiled.function.profile.summary())
