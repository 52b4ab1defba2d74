"""Sample eight schools with the defaults and print the ArviZ summary."""

from arviz_stats import summary

import kiln as kl
from eight_schools import build

with build():
    idata = kl.sample(random_seed=2026, target_accept=0.9, progressbar=False)

print(summary(idata, var_names=["mu", "tau", "theta"]).round(2).to_string())
print(
    f"compile time {idata.attrs['compile_time']:.2f} s, sampling time "
    f"{idata.attrs['sampling_time']:.2f} s ({idata.attrs['backend']} backend, "
    f"{idata.attrs['nuts_sampler']} NUTS)"
)
