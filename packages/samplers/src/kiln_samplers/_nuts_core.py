"""The NUTS transition: multinomial sampling, generalized U-turn, iterative trees.

Plain Python in the subset Numba compiles: :mod:`kiln_samplers._numba_nuts` compiles
these functions once (a model's log-density is a function-pointer argument, so one
cached compile serves every model); the Python path runs them as they are, calling a
Python callable. ``_nuts_kernel.c`` is the same algorithm written in C, line by line
(:mod:`kiln_samplers._c_nuts`); the bit-exact test of ``test_nuts.py`` is the contract
between the two: a change here is made there too, and that test checks they agree.
Every call of the log-density goes through :func:`call_logp`: in Python ``fn(x, grad,
user_data) -> logp`` writes the gradient of the log-density at ``x`` into ``grad``; the
Numba kernel replaces :func:`call_logp` by a call of the model's native C function
(``kiln_compile.NativeModel``'s ABI), as the C kernel does.

The tree is built as in NumPyro's iterative NUTS: a subtree of 2**depth leapfrog
steps is grown one leaf at a time from the end of the trajectory in a random
direction, keeping momentum checkpoints so that the U-turn criterion (Betancourt's
generalized one, on the sum of momenta) is checked on every balanced sub-subtree as
it completes. As in Stan (since 2.26) and nuts-rs (nutpie's sampler), the merge of
two halves is also checked across its boundary: each half extended by the other half's
leaf next to the boundary (one more checkpoint per level keeps the momentum of the leaf
before each second half). Inside a subtree such a U-turn rejects the whole subtree, so
the first half extended by the second's first leaf is checked as soon as that leaf
exists (the leaves that would follow cannot change the outcome and are not computed);
at the top, where the old trajectory and the new subtree merge, a U-turn only ends the
doubling. Leaves are sampled in proportion to exp(-energy) (multinomial, biased
progressive sampling at the top level); a leaf whose energy error passes
``max_energy_error`` is a divergence and ends the trajectory; so is a point where the
log-density raises (a Cholesky factor of a matrix that is not positive definite...),
as in Stan.

Per transition, ``stats`` receives: diverging, energy, energy_error, max_energy_error,
tree_depth, n_steps, step_size, acceptance_rate (the mean Metropolis acceptance over
the leaves, which step-size adaptation targets) and lp.
"""

from __future__ import annotations

import math

import numpy as np

N_STATS = 9
DIVERGING, ENERGY, ENERGY_ERROR, MAX_ENERGY_ERROR, TREE_DEPTH, N_STEPS, STEP_SIZE, ACCEPT, LP = (
    range(N_STATS)
)


def kinetic(p, inv_mass):  # type: ignore[no-untyped-def]
    """Return 0.5 * p' M^-1 p for a diagonal inverse mass ``inv_mass``."""
    total = 0.0
    for i in range(p.shape[0]):
        total += p[i] * p[i] * inv_mass[i]
    return 0.5 * total


def symmetric_accept(error):  # type: ignore[no-untyped-def]
    """Return nuts-rs's symmetric acceptance of a leaf: 2 e^-|error| / (1 + e^-|error|).

    ``error`` is the leaf's energy minus the start's; the statistic is
    2 min(1, e^-error) / (1 + e^-error), a function of |error| (0 when infinite).
    """
    if not error < np.inf:
        return 0.0
    decay = math.exp(-abs(error))
    return 2.0 * decay / (1.0 + decay)


def is_turning(p_left, p_right, p_sum, inv_mass):  # type: ignore[no-untyped-def]
    """Generalized U-turn: the momentum sum points against either end's velocity."""
    left = 0.0
    right = 0.0
    for i in range(p_sum.shape[0]):
        rho = p_sum[i] - 0.5 * (p_left[i] + p_right[i])
        left += inv_mass[i] * p_left[i] * rho
        right += inv_mass[i] * p_right[i] * rho
    return left <= 0.0 or right <= 0.0


def log_add_exp(a, b):  # type: ignore[no-untyped-def]
    """Return log(exp(a) + exp(b)) without overflow (``np.logaddexp`` for two floats)."""
    if a == b:
        return a + math.log(2.0)
    if a < b:
        a, b = b, a
    if b == -math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


def call_logp(fn, user_data, q, g):  # type: ignore[no-untyped-def]
    """Return the log-density at ``q`` (its gradient into ``g``); -inf where it raises."""
    try:
        return fn(q, g, user_data)
    except Exception:  # e.g. a covariance that is not positive definite: reject the point
        return -np.inf


def leapfrog(fn, user_data, q, p, g, eps, inv_mass, q_out, p_out, g_out):  # type: ignore[no-untyped-def]
    """One leapfrog step of size ``eps`` from (q, p, grad g); return the new logp."""
    n = q.shape[0]
    for i in range(n):
        p_out[i] = p[i] + 0.5 * eps * g[i]
    for i in range(n):
        q_out[i] = q[i] + eps * inv_mass[i] * p_out[i]
    logp = call_logp(fn, user_data, q_out, g_out)
    for i in range(n):
        p_out[i] = p_out[i] + 0.5 * eps * g_out[i]
    return logp


def _ckpt_indices(n):  # type: ignore[no-untyped-def]
    """Return the checkpoint range of leaf ``n``: (idx_min, idx_max)."""
    idx_max = 0
    m = n >> 1
    while m:
        idx_max += m & 1
        m >>= 1
    trailing = 0
    m = n
    while m & 1:
        trailing += 1
        m >>= 1
    return idx_max - trailing + 1, idx_max


def nuts_step(  # type: ignore[no-untyped-def]
    fn,
    user_data,
    rng,
    q,
    logp,
    grad,
    eps,
    inv_mass,
    max_depth,
    max_energy_error,
    stats,
    info,
):
    """Run one NUTS transition from (q, logp, grad): update them in place; fill ``stats``.

    Returns the new log-density; ``info[0]`` receives the new point's position in the
    trajectory (leapfrog steps from the start, negative backwards; 0: it did not move),
    ``info[1]`` the leaves' mean symmetric acceptance (:func:`symmetric_accept`).
    """
    n = q.shape[0]
    p0 = np.empty(n)
    for i in range(n):
        p0[i] = rng.standard_normal() / math.sqrt(inv_mass[i])
    energy0 = -logp + kinetic(p0, inv_mass)

    # The trajectory's two ends (position, momentum, gradient) and its momentum sum.
    q_left, p_left, g_left = q.copy(), p0.copy(), grad.copy()
    q_right, p_right, g_right = q.copy(), p0.copy(), grad.copy()
    p_sum = p0.copy()
    log_w = 0.0  # log of the sum of the leaves' weights exp(-energy error)
    q_prop, g_prop = q.copy(), grad.copy()
    logp_prop = logp

    # Work arrays of one subtree.
    q_new, p_new, g_new = np.empty(n), np.empty(n), np.empty(n)
    sub_q, sub_g = np.empty(n), np.empty(n)
    sub_p_sum = np.empty(n)
    part = np.empty(n)
    p_near = np.empty(n)  # the old trajectory's end that the subtree grows from
    p_ckpts = np.empty((max_depth + 1, n))
    p_sum_ckpts = np.empty((max_depth + 1, n))
    p_prev_ckpts = np.empty((max_depth + 1, n))  # the leaves before the checkpoints

    depth = 0
    n_steps = 0
    diverging = False
    sum_accept = 0.0
    sum_symmetric = 0.0
    max_error = 0.0
    chosen_error = 0.0
    idx_left, idx_right, idx_prop, sub_idx = 0, 0, 0, 0
    while depth < max_depth:
        forward = rng.random() < 0.5
        step = eps if forward else -eps
        if forward:
            q_cur, p_cur, g_cur = q_right.copy(), p_right.copy(), g_right.copy()
            idx_cur, idx_step = idx_right, 1
        else:
            q_cur, p_cur, g_cur = q_left.copy(), p_left.copy(), g_left.copy()
            idx_cur, idx_step = idx_left, -1
        for i in range(n):
            p_near[i] = p_cur[i]
        n_leaves = 1 << depth
        sub_log_w = -np.inf
        sub_logp = 0.0
        sub_error = 0.0
        sub_turning = False
        for i in range(n):
            sub_p_sum[i] = 0.0
        for leaf in range(n_leaves):
            idx_min, idx_max = _ckpt_indices(leaf)
            if leaf % 2 == 0 and leaf > 0:
                for i in range(n):
                    p_prev_ckpts[idx_max, i] = p_cur[i]  # the last leaf of a first half
            leaf_logp = leapfrog(
                fn, user_data, q_cur, p_cur, g_cur, step, inv_mass, q_new, p_new, g_new
            )
            n_steps += 1
            idx_cur += idx_step
            for i in range(n):
                q_cur[i], p_cur[i], g_cur[i] = q_new[i], p_new[i], g_new[i]
            energy = -leaf_logp + kinetic(p_cur, inv_mass)
            error = energy - energy0
            if not math.isfinite(error):
                error = np.inf
            if abs(error) > max_error:
                max_error = abs(error)
            sum_accept += math.exp(min(0.0, -error)) if error < np.inf else 0.0
            sum_symmetric += symmetric_accept(error)
            if error > max_energy_error:
                diverging = True
                break
            # Multinomial sampling within the subtree (uniform progressive).
            leaf_w = -error
            new_sub_log_w = log_add_exp(sub_log_w, leaf_w)
            if rng.random() < math.exp(leaf_w - new_sub_log_w):
                for i in range(n):
                    sub_q[i], sub_g[i] = q_cur[i], g_cur[i]
                sub_logp = leaf_logp
                sub_error = error
                sub_idx = idx_cur
            sub_log_w = new_sub_log_w
            for i in range(n):
                sub_p_sum[i] += p_cur[i]
            # U-turn checks of every balanced sub-subtree ending at this leaf.
            if leaf % 2 == 0:
                for i in range(n):
                    p_ckpts[idx_max, i] = p_cur[i]
                    p_sum_ckpts[idx_max, i] = sub_p_sum[i]
                if leaf > 0:
                    # This leaf starts the second half of a sub-subtree whose first half
                    # (from checkpoint idx_max - 1) is complete: check the first half
                    # extended by this leaf now (the subtree is rejected if it turns).
                    k = idx_max - 1
                    for i in range(n):
                        part[i] = sub_p_sum[i] - p_sum_ckpts[k, i] + p_ckpts[k, i]
                    if is_turning(p_ckpts[k], p_cur, part, inv_mass):
                        sub_turning = True
                        break
            else:
                for k in range(idx_max, idx_min - 1, -1):
                    for i in range(n):
                        part[i] = sub_p_sum[i] - p_sum_ckpts[k, i] + p_ckpts[k, i]
                    if is_turning(p_ckpts[k], p_cur, part, inv_mass):  # symmetric in the ends
                        sub_turning = True
                        break
                    if k < idx_max:
                        # The second half (from checkpoint k + 1) extended by the last
                        # leaf of the first half.
                        for i in range(n):
                            part[i] = (
                                sub_p_sum[i] - p_sum_ckpts[k + 1, i] + p_ckpts[k + 1, i]
                            ) + p_prev_ckpts[k + 1, i]
                        if is_turning(p_prev_ckpts[k + 1], p_cur, part, inv_mass):
                            sub_turning = True
                            break
                if sub_turning:
                    break
        depth += 1
        if forward:
            q_right, p_right, g_right, idx_right = q_cur, p_cur, g_cur, idx_cur
        else:
            q_left, p_left, g_left, idx_left = q_cur, p_cur, g_cur, idx_cur
        if diverging or sub_turning:
            break
        # Biased progressive sampling between the old tree and the new subtree.
        if rng.random() < math.exp(min(0.0, sub_log_w - log_w)):
            for i in range(n):
                q_prop[i], g_prop[i] = sub_q[i], sub_g[i]
            logp_prop = sub_logp
            chosen_error = sub_error
            idx_prop = sub_idx
        log_w = log_add_exp(log_w, sub_log_w)
        # U-turn checks across the merge: the old trajectory extended by the subtree's
        # first leaf, and the subtree extended by the old trajectory's end next to it
        # (the full trajectory's check covers them when both are single leaves).
        turning = False
        if n_leaves > 1:
            p_far = p_left if forward else p_right  # the old trajectory's other end
            for i in range(n):
                part[i] = p_sum[i] + p_ckpts[0, i]
            turning = is_turning(p_far, p_ckpts[0], part, inv_mass)
            if not turning:
                for i in range(n):
                    part[i] = sub_p_sum[i] + p_near[i]
                turning = is_turning(p_near, p_cur, part, inv_mass)
        for i in range(n):
            p_sum[i] += sub_p_sum[i]
        if turning or is_turning(p_left, p_right, p_sum, inv_mass):
            break
    for i in range(n):
        q[i] = q_prop[i]
        grad[i] = g_prop[i]
    stats[DIVERGING] = 1.0 if diverging else 0.0
    stats[ENERGY] = energy0 + chosen_error
    stats[ENERGY_ERROR] = chosen_error
    stats[MAX_ENERGY_ERROR] = max_error
    stats[TREE_DEPTH] = depth
    stats[N_STEPS] = n_steps
    stats[STEP_SIZE] = eps
    stats[ACCEPT] = sum_accept / max(n_steps, 1)
    stats[LP] = logp_prop
    info[0] = idx_prop
    info[1] = sum_symmetric / max(n_steps, 1)
    return logp_prop


#: Rows of the Welford sums ``sample_chunk`` collects: two samples (at rows 0 and
#: ``FOREGROUND``) of five rows each: count (in column 0), mean and M2 of the points,
#: mean and M2 of the gradients. Rows 0-4 hold the current window; rows 5-9 the
#: foreground sample of the gradient-based metric (the previous window and the current).
WELFORD_ROWS = 10
FOREGROUND = 5
#: The limits of an inverse-mass element of the gradient-based metric (nuts-rs's).
INV_MASS_LOWER, INV_MASS_UPPER = 1e-20, 1e20


def welford_add(welford, row, q, grad):  # type: ignore[no-untyped-def]
    """Add the point ``q`` and its gradient to the Welford sums at ``welford[row:row + 5]``."""
    welford[row, 0] += 1.0
    count = welford[row, 0]
    for i in range(q.shape[0]):
        delta = q[i] - welford[row + 1, i]
        welford[row + 1, i] += delta / count
        welford[row + 2, i] += delta * (q[i] - welford[row + 1, i])
        delta = grad[i] - welford[row + 3, i]
        welford[row + 3, i] += delta / count
        welford[row + 4, i] += delta * (grad[i] - welford[row + 3, i])


def grad_metric(welford, inv_mass):  # type: ignore[no-untyped-def]
    """Set ``inv_mass`` to sqrt(Var[points] / Var[gradients]) of the foreground sample.

    Only once the foreground holds 3 points; an element whose estimate is zero or not
    finite keeps its value; the others are clamped to the limits.
    """
    if welford[FOREGROUND, 0] < 3.0:
        return
    for i in range(inv_mass.shape[0]):
        var_g = welford[FOREGROUND + 4, i]
        if var_g > 0.0:
            ratio = math.sqrt(welford[FOREGROUND + 2, i] / var_g)
            if ratio > 0.0 and ratio < math.inf:
                inv_mass[i] = min(max(ratio, INV_MASS_LOWER), INV_MASS_UPPER)


# Slots of the step-size adaptation state (dual averaging, Hoffman & Gelman 2014);
# AVERAGE_FROM: the count at the last restart, where the averaged log step starts anew.
LOG_EPS, LOG_EPS_BAR, H_BAR, COUNT, MU, AVERAGE_FROM = range(6)
N_ADAPT = 6
GAMMA, T0, KAPPA = 0.05, 10.0, 0.75
#: ``sample_chunk``'s ``adapt_step_size``: keep the step size; adapt it to the leaves'
#: mean acceptance (Stan's statistic); to their mean :func:`symmetric_accept` (nuts-rs's,
#: late in its warm-up).
ADAPT_OFF, ADAPT_ACCEPT, ADAPT_SYMMETRIC = 0, 1, 2


def dual_averaging(adapt, accept, target):  # type: ignore[no-untyped-def]
    """Update the step-size state ``adapt`` after a transition with acceptance ``accept``.

    The averaged log step weighs the new iterate ``(COUNT - AVERAGE_FROM)^-κ``: 1 at the
    first update after a restart, whatever count the restart set.
    """
    adapt[COUNT] += 1.0
    t = adapt[COUNT]
    eta = 1.0 / (t + T0)
    adapt[H_BAR] = (1.0 - eta) * adapt[H_BAR] + eta * (target - accept)
    adapt[LOG_EPS] = adapt[MU] - math.sqrt(t) / GAMMA * adapt[H_BAR]
    weight = (t - adapt[AVERAGE_FROM]) ** (-KAPPA)
    adapt[LOG_EPS_BAR] = weight * adapt[LOG_EPS] + (1.0 - weight) * adapt[LOG_EPS_BAR]


def sample_chunk(  # type: ignore[no-untyped-def]
    fn,
    user_data,
    rng,
    q,
    grad,
    logp,
    inv_mass,
    adapt,
    welford,
    n_draws,
    draws,
    stats,
    target_accept,
    max_depth,
    max_energy_error,
    jitter,
    adapt_step_size,
    collect_variance,
    update_metric,
):
    """Run ``n_draws`` transitions; write each point and its stats; return the last logp.

    While ``adapt_step_size`` (:data:`ADAPT_ACCEPT` or :data:`ADAPT_SYMMETRIC`: the
    statistic it targets), each transition uses ``exp(adapt[LOG_EPS])`` and updates it;
    otherwise (:data:`ADAPT_OFF`) ``exp(adapt[LOG_EPS_BAR])``; either times a uniform
    draw from [1 - ``jitter``, 1 + ``jitter``] when ``jitter`` > 0. While
    ``collect_variance``, each point
    and the gradient there go into the current window's Welford sums (rows 0-4 of
    ``welford``, :data:`WELFORD_ROWS`). While ``update_metric``, they also go into the
    foreground's, and ``inv_mass`` becomes its gradient-based estimate (:func:`grad_metric`)
    after each transition; only draws that moved go into the sums then (a divergent
    one: that moved more than 4 steps), as in nuts-rs.
    """
    n = q.shape[0]
    info = np.zeros(2)
    for k in range(n_draws):
        eps = math.exp(adapt[LOG_EPS] if adapt_step_size != ADAPT_OFF else adapt[LOG_EPS_BAR])
        if jitter > 0.0:
            eps *= 1.0 + jitter * (2.0 * rng.random() - 1.0)
        row = stats[k]
        logp = nuts_step(
            fn, user_data, rng, q, logp, grad, eps, inv_mass, max_depth, max_energy_error, row,
            info,
        )  # fmt: skip
        if adapt_step_size != ADAPT_OFF:
            accept = info[1] if adapt_step_size == ADAPT_SYMMETRIC else row[ACCEPT]
            dual_averaging(adapt, accept if math.isfinite(accept) else 0.0, target_accept)
        moved = abs(info[0]) > 4.0 if row[DIVERGING] != 0.0 else info[0] != 0.0
        if collect_variance and (moved or not update_metric):
            welford_add(welford, 0, q, grad)
        if update_metric and moved:
            welford_add(welford, FOREGROUND, q, grad)
            grad_metric(welford, inv_mass)
        for i in range(n):
            draws[k, i] = q[i]
    return logp
