"""kl.Data: a runtime input; kl.set_data swaps it without recompiling; freezing it."""

import time

import numpy as np

import kiln as kl

rng = np.random.default_rng(0)
x_obs = rng.normal(size=50)
y_obs = 1.0 + 2.0 * x_obs + rng.normal(scale=0.5, size=50)

with kl.Model() as model:
    x = kl.Data("x", x_obs, dims="obs")
    y = kl.Data("y", y_obs, dims="obs")
    a = kl.Normal("a", 0, 10)
    b = kl.Normal("b", 0, 10)
    s = kl.HalfNormal("s", 1)
    x_centred = x - x.mean()  # computed from the data on every call
    kl.Normal("lik", a + b * x_centred, s, observed=y, dims="obs")

with kl.config.change(profile=True):
    compiled = model.logp_dlogp_function()
point = compiled.initial_point(seed=0)
print(f"logp with 50 rows:  {compiled.logp_dlogp(point)[0]:.6f}")

start = time.perf_counter()
kl.set_data({"x": x_obs[:20], "y": y_obs[:20]}, model=model)  # no recompile
logp = compiled.logp_dlogp(point)[0]
elapsed_us = 1e6 * (time.perf_counter() - start)
print(f"logp with 20 rows:  {logp:.6f}   (set_data + call: {elapsed_us:.0f} us)")

frozen = kl.freeze_dims_and_data(model)  # the data become constants of the graph
with kl.config.change(profile=True):
    compiled_frozen = frozen.logp_dlogp_function()
print(f"logp of the frozen copy: {compiled_frozen.logp_dlogp(point)[0]:.6f}")
for name, c in (("with kl.Data", compiled), ("frozen", compiled_frozen)):
    nodes = c.function.profile.nodes
    print(f"{name:>13}: {nodes['prepared']} nodes prepared -> {nodes['rewritten']} after Stage 1")
