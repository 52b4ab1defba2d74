"""One log-density written with a Python loop over scalars and written with arrays."""

import time

import numpy as np

import kiln as kl
import kiln.tensor as kt

mu, sigma = kt.scalar("mu"), kt.scalar("sigma")


def looped(y):
    """Return the sum with one scalar term per observation: six nodes per element."""
    total = 0.0
    for i in range(len(y)):
        total = total - 0.5 * ((y[i] - mu) / sigma) ** 2 - kt.log(sigma)
    return total


def vectorized(y):
    """Return the same sum over one array: a dozen nodes whatever the length of y."""
    return kt.sum(-0.5 * ((y - mu) / sigma) ** 2 - kt.log(sigma))


def per_call_us(f, calls=2000):
    start = time.perf_counter()
    for _ in range(calls):
        f(0.1, 1.3)
    return 1e6 * (time.perf_counter() - start) / calls


for n in (100, 300):
    y = np.random.default_rng(0).normal(size=n)
    for name, build in (("loop", looped), ("vectorized", vectorized)):
        f = kl.function([mu, sigma], build(y), profile=True)
        f(0.1, 1.3)  # the first call compiles (LLVM)
        p = f.profile
        print(
            f"  n={n:3d} {name:>10}: {p.nodes['prepared']:5d} nodes -> {p.nodes['rewritten']:2d}, "
            f"Stage 1 {1e3 * p.compile_times['rewrite']:6.1f} ms, "
            f"first call {p.first_call_time:5.2f} s, later calls {per_call_us(f):5.1f} us"
        )

print("\nthe vectorized graph after Stage 1 (one pass over y, no temporary array):")
kl.dprint(kl.function([mu, sigma], vectorized(y)).outputs)
print("\nthe same without the fusion phase (each node one more pass over an array of n values):")
kl.dprint(kl.function([mu, sigma], vectorized(y), mode=kl.FAST_RUN.excluding("fusion")).outputs)
