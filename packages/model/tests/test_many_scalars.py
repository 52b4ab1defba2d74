"""Models written as many scalar variables in a loop (issue #21, item 3).

They compile on the default backend, their log-density and gradient equal a
vectorized NumPy / SciPy reference, and what they compile to grows linearly.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import kiln as kl
from kiln_compile import available_linkers
from kiln_graph import toposort
from kiln_model import _logprob, _vectorize

N = 120  # about 2,000 generated lines: split into several chunk functions


def _model(n: int, coefs: np.ndarray, observed: float) -> kl.Model:
    with kl.Model() as m:
        scales = [kl.HalfNormal(f"s{i}", 1.0) for i in range(n // 2)]
        xs = [kl.Normal(f"x{i}", 0.0, s) for i, s in enumerate(scales)]
        kl.Normal("y", sum(x * c for x, c in zip(xs, coefs, strict=True)), 1.0, observed=observed)
    return m


def _reference(q: np.ndarray, coefs: np.ndarray, observed: float) -> float:
    """Return the joint log-density of the unconstrained vector [log s_0, ..., x_0, ...]."""
    half = q.size // 2
    log_s, x = q[:half], q[half:]
    s = np.exp(log_s)
    return float(
        np.sum(stats.halfnorm.logpdf(s) + log_s)
        + np.sum(stats.norm.logpdf(x, 0.0, s))
        + stats.norm.logpdf(observed, np.dot(x, coefs), 1.0)
    )


def _reference_grad(q: np.ndarray, coefs: np.ndarray, observed: float) -> np.ndarray:
    half = q.size // 2
    log_s, x = q[:half], q[half:]
    s = np.exp(log_s)
    resid = observed - np.dot(x, coefs)
    d_log_s = -(s**2) + x**2 / s**2  # HalfNormal, the log Jacobian (+1), Normal (-1)
    d_x = -x / s**2 + resid * coefs
    return np.concatenate([d_log_s, d_x])


def test_a_model_of_many_scalars_matches_a_vectorized_reference():
    rng = np.random.default_rng(0)
    coefs = rng.normal(size=N // 2)
    linker = "numba" if "numba" in available_linkers() else "vm"  # kiln's default backend
    compiled = _model(N, coefs, 0.7).logp_dlogp_function(mode=kl.Mode(linker=linker))
    assert compiled.function.linker == linker
    names = [b.name for b in compiled.layout]
    half = N // 2
    # The HalfNormal scales come first (log-transformed), then the normals.
    assert names[:2] == ["s0_log__", "s1_log__"] and names[half] == "x0"
    for seed in range(3):
        q = np.random.default_rng(seed).normal(size=N) * 0.5
        logp, grad = compiled.logp_dlogp(q)
        np.testing.assert_allclose(logp, _reference(q, coefs, 0.7), rtol=1e-10)
        np.testing.assert_allclose(grad, _reference_grad(q, coefs, 0.7), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("linker", ["vm"])
def test_what_a_scalar_model_compiles_to_grows_linearly(linker):
    counts = []
    for n in (100, 200):
        coefs = np.linspace(-1.0, 1.0, n // 2)
        compiled = _model(n, coefs, 0.2).logp_dlogp_function(mode=kl.Mode(linker=linker))
        counts.append(len(compiled.function.fgraph.nodes))
    assert counts[1] <= 2.2 * counts[0]


def test_expand_draws_of_many_scalars():
    coefs = np.ones(20)
    linker = "numba" if "numba" in available_linkers() else "vm"
    compiled = _model(40, coefs, 0.0).logp_dlogp_function(mode=kl.Mode(linker=linker))
    qs = np.random.default_rng(1).normal(size=(4, 40))
    out = compiled.expand_draws(qs)
    np.testing.assert_allclose(out["s3"], np.exp(qs[:, 3]))
    np.testing.assert_array_equal(out["x5"], qs[:, 25])


def _mixed(n: int) -> kl.Model:
    """Scalars of several kinds, interleaved: groups with gathers, shared and stacked params."""
    with kl.Model() as m:
        s = [kl.HalfNormal(f"s{i}", 1.5) for i in range(n)]
        x = []
        for i in range(n):
            # mu: the previous x (a random walk), sigma: the matching scale.
            x.append(kl.Normal(f"x{i}", x[-1] if x else 0.5, s[i]))
            kl.Exponential(f"e{i}", 2.0 + i % 3)  # interleaved: x and e are gathers of x
        for i in range(n):
            kl.Normal(f"o{i}", x[i], s[i], observed=0.1 * i - 0.3)
        kl.Poisson("k", kl.math.exp(x[0]), observed=3)
        kl.Deterministic("total", sum(x))
    return m


def _logp_mixed(q: np.ndarray, n: int) -> float:
    """Return the joint log-density of ``_mixed(n)`` at its flat vector ``q``, by SciPy."""
    log_s, rest = q[:n], q[n:].reshape(n, 2)
    x, log_e = rest[:, 0], rest[:, 1]
    s, e = np.exp(log_s), np.exp(log_e)
    rates = 2.0 + np.arange(n) % 3
    mu = np.concatenate([[0.5], x[:-1]])
    obs = 0.1 * np.arange(n) - 0.3
    return float(
        np.sum(stats.halfnorm.logpdf(s, scale=1.5) + log_s)
        + np.sum(stats.norm.logpdf(x, mu, s))
        + np.sum(stats.expon.logpdf(e, scale=1.0 / rates) + log_e)
        + np.sum(stats.norm.logpdf(obs, x, s))
        + stats.poisson.logpmf(3, np.exp(x[0]))
    )


@pytest.fixture
def ungrouped(monkeypatch):
    """Build models with one term per variable (no group is ever large enough)."""

    def build(make, *args):
        with monkeypatch.context() as mp:
            mp.setattr(_vectorize, "GROUP_MIN", 10**9)
            model = make(*args)
            return model, _logprob.build_logp(model)

    return build


def test_scalars_of_one_kind_share_one_vector_term():
    graph = _logprob.build_logp(_mixed(12))
    sizes = sorted((len(g.names), g.free, g.names[0]) for g in graph.groups)
    # s: HalfNormal (log); x: Normal; e: Exponential (log); o: observed Normal.
    assert sizes == [(12, False, "o0"), (12, True, "e0"), (12, True, "s0"), (12, True, "x0")]
    # Fewer than GROUP_MIN of a kind, or not scalar: one term each, as before.
    with kl.Model() as small:
        for i in range(_vectorize.GROUP_MIN - 1):
            kl.Normal(f"a{i}", 0.0, 1.0)
        kl.Normal("v", 0.0, 1.0, shape=3)
    assert _logprob.build_logp(small).groups == []


def test_grouped_log_density_matches_scipy_the_ungrouped_graph_and_finite_differences(
    ungrouped,
):
    n = 12
    compiled = _mixed(n).logp_dlogp_function(mode=kl.Mode(linker="vm"))
    model0, _ = ungrouped(_mixed, n)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_vectorize, "GROUP_MIN", 10**9)
        plain = model0.logp_dlogp_function(mode=kl.Mode(linker="vm"))
    assert len(compiled.function.fgraph.nodes) < len(plain.function.fgraph.nodes)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q = rng.normal(size=compiled.ndim) * 0.5
        logp, grad = compiled.logp_dlogp(q)
        logp0, grad0 = plain.logp_dlogp(q)
        np.testing.assert_allclose(logp, _logp_mixed(q, n), rtol=1e-12)
        np.testing.assert_allclose(logp, logp0, rtol=1e-14)
        np.testing.assert_allclose(grad, grad0, rtol=1e-13, atol=1e-13)
        h = 1e-6
        fd = [
            (_logp_mixed(q + h * d, n) - _logp_mixed(q - h * d, n)) / (2 * h)
            for d in np.eye(q.size)
        ]
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


def test_diagnostics_name_the_member_of_a_group():
    n = 10
    with kl.Model() as m:
        r = [kl.Normal(f"r{i}", 0.0, 1.0, initval=-1.0 if i == 3 else 1.0) for i in range(n)]
        for i in range(n):
            kl.Exponential(f"e{i}", r[i], initval=1.0)  # lam = r3 = -1 < 0: only e3 is -inf
    assert len(_logprob.build_logp(m).groups) == 2
    logps = m.point_logps()
    assert [k for k, v in logps.items() if not np.isfinite(v)] == ["e3"]
    point = m.initial_point()
    for i in (0, 7):
        e = np.exp(point[f"e{i}_log__"])
        expected = stats.expon.logpdf(e, scale=1.0) + np.log(e)  # lam = r_i = 1
        assert logps[f"e{i}"] == round(float(expected), 2)
        assert logps[f"r{i}"] == round(float(stats.norm.logpdf(1.0)), 2)
    with pytest.raises(kl.ModelError, match="'e3' has log-density -inf"):
        kl.check_initial_point(m)


def test_expand_draws_of_groups_has_few_outputs():
    compiled = _mixed(12).logp_dlogp_function(mode=kl.Mode(linker="vm"))
    qs = np.random.default_rng(2).normal(size=(5, compiled.ndim))
    out = compiled.expand_draws(qs)
    per_draw = [compiled.expand(q) for q in qs]
    assert list(out) == compiled.out_names
    for name in compiled.out_names:
        np.testing.assert_array_equal(out[name], np.stack([d[name] for d in per_draw]))
    np.testing.assert_allclose(out["e4"], np.exp(qs[:, 12 + 2 * 4 + 1]))
    # One output per group (s, x, e) and the deterministic, not one per variable.
    assert len(compiled._expand_draws.fgraph.outputs) == 4  # type: ignore[union-attr]


def test_sums_over_many_scalars_compile_to_vector_code():
    # The benchmark's models: the code does not grow with the number of scalars.
    counts = []
    for n in (100, 400):
        coefs = np.linspace(-1.0, 1.0, n // 2)
        compiled = _model(n, coefs, 0.2).logp_dlogp_function(mode=kl.Mode(linker="vm"))
        counts.append(len(compiled.function.fgraph.nodes))
        q = np.random.default_rng(n).normal(size=n) * 0.5
        logp, grad = compiled.logp_dlogp(q)
        np.testing.assert_allclose(logp, _reference(q, coefs, 0.2), rtol=1e-12)
        np.testing.assert_allclose(grad, _reference_grad(q, coefs, 0.2), rtol=1e-10, atol=1e-12)
    assert counts[1] == counts[0] < 60


def _sum_graph(n: int):
    x = kl.tensor.vector("x", shape=(n,))
    c = np.linspace(0.5, 2.0, n)
    shared = kl.tensor.exp(x[0])
    terms = [x[i] * c[i] for i in range(n)]  # alike: a slice times a constant vector
    terms += [kl.tensor.sin(x[i]) * shared for i in range(n // 2)]  # alike, a shared scalar
    terms += [x[1] ** 2, kl.tensor.constant(3.0)]  # others, added one by one
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return x, c, total, shared * x[2]  # ``shared`` is used outside the sum too


def _sum_reference(q: np.ndarray, c: np.ndarray) -> float:
    n = q.size
    return float(np.sum(q * c) + np.sum(np.sin(q[: n // 2])) * np.exp(q[0]) + q[1] ** 2 + 3.0)


def test_vectorize_sums_packs_alike_terms_and_keeps_the_others():
    n = 40
    x, c, total, other = _sum_graph(n)
    new_total, new_other = _vectorize.vectorize_sums([total, other])
    assert new_other is other
    nodes = toposort([new_total])
    assert len(nodes) < 25  # not one node per term
    f = kl.function([x], [new_total, new_other], mode=kl.Mode(linker="vm"))
    g = kl.function([x], kl.grad(new_total, x), mode=kl.Mode(linker="vm"))
    g0 = kl.function([x], kl.grad(total, x), mode=kl.Mode(linker="vm"))
    q = np.random.default_rng(0).normal(size=n)
    value, value_other = f(q)
    np.testing.assert_allclose(value, _sum_reference(q, c), rtol=1e-13)
    np.testing.assert_allclose(value_other, np.exp(q[0]) * q[2], rtol=1e-15)
    np.testing.assert_allclose(g(q), g0(q), rtol=1e-13, atol=1e-14)


def test_vectorize_sums_leaves_short_sums_and_unlike_terms_alone():
    x = kl.tensor.vector("x", shape=(20,))
    short = sum(x[i] * 2.0 for i in range(_vectorize.GROUP_MIN - 1))
    unlike = sum((kl.tensor.exp if i % 2 else kl.tensor.sin)(x[i]) for i in range(12))
    assert _vectorize.vectorize_sums([short, unlike]) == [short, unlike]


def test_pack_forms():
    v = kl.tensor.vector("v", shape=(10,))
    s = kl.tensor.scalar("s")
    assert _vectorize.pack([v[i] for i in range(10)]) is v
    sliced = _vectorize.pack([v[i] for i in range(1, 9, 3)])
    assert sliced is not None and sliced.owner.op.idx_list  # v[1:8:3]
    assert _vectorize.pack([s] * 9) is s
    assert _vectorize.pack([v[i] for i in (0, 2, 3)]) is None  # not evenly spaced
    assert _vectorize.pack([v[0] * s, kl.tensor.exp(v[1])]) is None  # unlike ops
    f = kl.function(
        [v, s],
        [
            _vectorize.pack([v[i] * s + 1.0 for i in range(4)]),
            _vectorize.stack([v[0], s, v[3]]),
            _vectorize.pack([kl.tensor.constant(float(i)) for i in range(3)]),
        ],
        mode=kl.Mode(linker="vm"),
    )
    vv = np.arange(10.0) / 3
    a, b, c = f(vv, 1.5)
    np.testing.assert_array_equal(a, vv[:4] * 1.5 + 1.0)
    np.testing.assert_array_equal(b, [vv[0], 1.5, vv[3]])
    np.testing.assert_array_equal(c, [0.0, 1.0, 2.0])


def _regression(n: int, X: np.ndarray, y: np.ndarray, data: bool) -> kl.Model:
    """Return a regression written with one scalar coefficient per column, as users do."""
    with kl.Model() as m:
        cols = kl.Data("X", X) if data else X
        coefs = [kl.Normal(f"b{i}", 0.0, 1.0) for i in range(n)]
        a = kl.Normal("a", 0.0, 5.0)
        mu = a + sum(b * cols[:, i] for i, b in enumerate(coefs))
        kl.Normal("y", mu, kl.HalfNormal("sigma", 1.0), observed=y)
    return m


@pytest.mark.parametrize("data", [False, True], ids=["array", "Data"])
def test_sums_of_vector_terms_match_numpy_and_do_not_grow(data):
    rng = np.random.default_rng(5)
    counts = []
    for n in (20, 60):
        X, y = rng.normal(size=(15, n)), rng.normal(size=15)
        compiled = _regression(n, X, y, data).logp_dlogp_function(mode=kl.Mode(linker="vm"))
        counts.append(len(compiled.function.fgraph.nodes))
        q = rng.normal(size=n + 2) * 0.5
        b, a, log_sigma = q[:n], q[n], q[n + 1]
        resid = y - a - X @ b
        sigma = np.exp(log_sigma)
        expected = (
            np.sum(stats.norm.logpdf(b))
            + stats.norm.logpdf(a, 0.0, 5.0)
            + stats.halfnorm.logpdf(sigma)
            + log_sigma
            + np.sum(stats.norm.logpdf(resid, 0.0, sigma))
        )
        grad = np.concatenate(
            [
                -b + X.T @ resid / sigma**2,
                [-a / 25.0 + np.sum(resid) / sigma**2],
                [-(sigma**2) + 1.0 - y.size + np.sum(resid**2) / sigma**2],
            ]
        )
        logp, dlogp = compiled.logp_dlogp(q)
        np.testing.assert_allclose(logp, expected, rtol=1e-12)
        np.testing.assert_allclose(dlogp, grad, rtol=1e-10, atol=1e-10)
    assert counts[1] == counts[0]


def test_members_whose_parameters_differ_in_form_get_their_own_part():
    n = 30
    obs = np.linspace(-1.0, 2.0, n)
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 5.0)  # one group with the x, its parameters constants
        tau = kl.HalfNormal("tau", 1.0)
        for i in range(n):
            x = kl.Normal(f"x{i}", mu, tau)
            kl.Normal(f"y{i}", x, 1.0, observed=obs[i])
    groups = {g.names[0]: g for g in _logprob.build_logp(m).groups}
    assert sorted(groups) == ["mu", "y0"]
    assert len(groups["mu"].names) == n + 1 and len(groups["mu"].terms) == 2
    compiled = m.logp_dlogp_function(mode=kl.Mode(linker="vm"))
    assert len(compiled.function.fgraph.nodes) < 60
    q = np.random.default_rng(0).normal(size=compiled.ndim)
    mu_v, log_tau, x = q[0], q[1], q[2:]
    tau_v = np.exp(log_tau)
    expected = (
        stats.norm.logpdf(mu_v, 0.0, 5.0)
        + stats.halfnorm.logpdf(tau_v)
        + log_tau
        + np.sum(stats.norm.logpdf(x, mu_v, tau_v))
        + np.sum(stats.norm.logpdf(obs, x, 1.0))
    )
    np.testing.assert_allclose(compiled.logp_dlogp(q)[0], expected, rtol=1e-12)
    logps = m.point_logps({"mu": 0.5, "tau_log__": 0.0, **{f"x{i}": 0.1 * i for i in range(n)}})
    assert logps["x7"] == round(float(stats.norm.logpdf(0.7, 0.5, 1.0)), 2)
    assert logps["mu"] == round(float(stats.norm.logpdf(0.5, 0.0, 5.0)), 2)


def test_sampling_many_scalars_on_numba_recovers_the_known_posterior():
    # x_i ~ Normal(0, 1), y_i ~ Normal(x_i, 1): the posterior of x_i is Normal(y_i / 2, 1/2).
    n = 40
    y = np.linspace(-2.0, 2.0, n)
    with kl.Model():
        for i in range(n):
            x = kl.Normal(f"x{i}", 0.0, 1.0)
            kl.Normal(f"y{i}", x, 1.0, observed=y[i])
        idata = kl.sample(
            draws=2000, tune=500, chains=2, random_seed=3, progressbar=False, backend="numba"
        )
    post = idata.posterior
    means = np.array([float(post[f"x{i}"].mean()) for i in range(n)])
    sds = np.array([float(post[f"x{i}"].std()) for i in range(n)])
    # Each mean is off by about sd / sqrt(ESS) ~ 0.7 / 60; their spread is tested as a whole.
    z = (means - y / 2) / (np.sqrt(0.5) / np.sqrt(4000))
    assert np.sqrt(np.mean(z**2)) < 2.0
    np.testing.assert_allclose(sds, np.sqrt(0.5), rtol=0.1)


def test_transforms_with_equal_constant_bounds_share_a_group():
    n = 10
    with kl.Model() as m:
        for i in range(n):
            kl.Uniform(f"u{i}", -1.0, 2.0)  # one IntervalTransform each, equal bounds
            if i == 3:  # the u are not evenly spaced in the flat vector: a gather
                kl.Normal("v", 0.0, 1.0, shape=2)
        for i in range(n):
            kl.Uniform(f"w{i}", 0.0, 1.0 + i)  # bounds differ: one term each
    graph = _logprob.build_logp(m)
    assert [g.names[0] for g in graph.groups] == ["u0"]
    compiled = m.logp_dlogp_function(mode=kl.Mode(linker="vm"))
    flat = np.random.default_rng(4).normal(size=2 * n + 2)
    v, q = flat[4:6], np.delete(flat, [4, 5])
    sig = 1.0 / (1.0 + np.exp(-q))
    u, w = -1.0 + 3.0 * sig[:n], sig[n:] * (1.0 + np.arange(n))
    log_jac = np.log(sig * (1.0 - sig)) + np.log(np.r_[[3.0] * n, 1.0 + np.arange(n)])
    expected = (
        np.sum(stats.uniform.logpdf(u, -1.0, 3.0))
        + np.sum(stats.uniform.logpdf(w, 0.0, 1.0 + np.arange(n)))
        + np.sum(log_jac)
        + np.sum(stats.norm.logpdf(v))
    )
    logp, grad = compiled.logp_dlogp(flat)
    np.testing.assert_allclose(logp, expected, rtol=1e-12)
    np.testing.assert_allclose(grad[4:6], -v, rtol=1e-12)
    d_u = 1.0 - 2.0 * sig[:5]  # d log Jacobian / dq of the first u (Uniform: flat)
    np.testing.assert_allclose(np.delete(grad, [4, 5])[:5], d_u, rtol=1e-10, atol=1e-12)
