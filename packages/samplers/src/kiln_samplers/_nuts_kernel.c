/* kiln's NUTS transition in C: the functions of kiln_samplers/_nuts_core.py, line by line.
 *
 * Compiled by kiln_samplers._c_nuts with the system's C compiler (about 0.3 s, once per
 * installation: the library is cached). It computes exactly what _nuts_core computes
 * (the same arithmetic in the same order, -ffp-contract=off) and draws the same numbers
 * from the chain's NumPy generator (numpy's own random_standard_normal, from
 * libnpyrandom, and next_double), so a chain continues bit for bit whichever of the
 * Python, Numba and C kernels runs a chunk.
 *
 * The model's log-density is called through the native ABI every backend provides
 * (kiln_compile.NativeModel): int logp(size_t n, const double *x, double *grad,
 * double *logp, const void *user_data), returning 0 (ok), > 0 (the point is rejected:
 * log-density -inf, as in _nuts_core.call_logp) or < 0 (fatal: the chunk stops and the
 * code is reported).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "numpy/random/bitgen.h"

double random_standard_normal(bitgen_t *bitgen_state);

/* The model's log-density, in the native ABI (kiln_compile.NativeModel.logp_cptr). */
typedef int (*kiln_logp_fn)(size_t n, const double *x, double *grad, double *logp,
                            const void *user_data);

/* Slots of a stats row and of the step-size state (as in _nuts_core). */
enum { DIVERGING, ENERGY, ENERGY_ERROR, MAX_ENERGY_ERROR, TREE_DEPTH, N_STEPS, STEP_SIZE,
       ACCEPT, LP, N_STATS };
enum { LOG_EPS, LOG_EPS_BAR, H_BAR, COUNT, MU, AVERAGE_FROM };
static const double GAMMA = 0.05, T0 = 10.0, KAPPA = 0.75;
enum { ADAPT_OFF, ADAPT_ACCEPT, ADAPT_SYMMETRIC }; /* sample_chunk's adapt_step_size */
/* The Welford sums: two samples of five rows (_nuts_core.WELFORD_ROWS), and the limits
 * of an inverse-mass element of the gradient-based metric. */
enum { FOREGROUND = 5 };
static const double INV_MASS_LOWER = 1e-20, INV_MASS_UPPER = 1e20;

typedef struct {
    kiln_logp_fn fn;
    const void *user_data;
    int64_t n;
    int fatal; /* the first negative code the model returned (0: none) */
} model_t;

static double next_double(bitgen_t *rng) { return rng->next_double(rng->state); }

static double kinetic(const double *p, const double *inv_mass, int64_t n) {
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) total += p[i] * p[i] * inv_mass[i];
    return 0.5 * total;
}

static int is_turning(const double *p_left, const double *p_right, const double *p_sum,
                      const double *inv_mass, int64_t n) {
    double left = 0.0, right = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double rho = p_sum[i] - 0.5 * (p_left[i] + p_right[i]);
        left += inv_mass[i] * p_left[i] * rho;
        right += inv_mass[i] * p_right[i] * rho;
    }
    return left <= 0.0 || right <= 0.0;
}

static double log_add_exp(double a, double b) {
    if (a == b) return a + log(2.0);
    if (a < b) { double t = a; a = b; b = t; }
    if (b == -INFINITY) return a;
    return a + log1p(exp(b - a));
}

static double min0(double x) { return x < 0.0 ? x : 0.0; } /* Python's min(0.0, x) */

/* _nuts_core.symmetric_accept */
static double symmetric_accept(double error) {
    if (!(error < INFINITY)) return 0.0;
    double decay = exp(-fabs(error));
    return 2.0 * decay / (1.0 + decay);
}

/* _nuts_core.call_logp: the log-density at x (gradient into grad); -inf where the model
 * rejects x. A fatal code is kept in m->fatal (the chunk stops after this transition). */
static double call_model(model_t *m, double *x, double *grad) {
    double ret = 0.0;
    int status = m->fn((size_t)m->n, x, grad, &ret, m->user_data);
    if (status < 0 && m->fatal == 0) m->fatal = status;
    return status == 0 ? ret : -INFINITY;
}

static double leapfrog(model_t *m, const double *q, const double *p, const double *g,
                       double eps, const double *inv_mass, double *q_out, double *p_out,
                       double *g_out) {
    int64_t n = m->n;
    for (int64_t i = 0; i < n; i++) p_out[i] = p[i] + 0.5 * eps * g[i];
    for (int64_t i = 0; i < n; i++) q_out[i] = q[i] + eps * inv_mass[i] * p_out[i];
    double logp = call_model(m, q_out, g_out);
    for (int64_t i = 0; i < n; i++) p_out[i] = p_out[i] + 0.5 * eps * g_out[i];
    return logp;
}

static void ckpt_indices(int64_t n, int64_t *idx_min, int64_t *idx_max) {
    int64_t hi = 0, m = n >> 1, trailing = 0;
    while (m) { hi += m & 1; m >>= 1; }
    m = n;
    while (m & 1) { trailing++; m >>= 1; }
    *idx_min = hi - trailing + 1;
    *idx_max = hi;
}

/* Work arrays of one transition: N_WORK vectors of n, then three (max_depth + 1, n)
 * tables (the checkpoints' momenta, momentum sums and previous leaves' momenta). */
enum { P0, Q_LEFT, P_LEFT, G_LEFT, Q_RIGHT, P_RIGHT, G_RIGHT, P_SUM, Q_PROP, G_PROP,
       Q_CUR, P_CUR, G_CUR, Q_NEW, P_NEW, G_NEW, SUB_Q, SUB_G, SUB_P_SUM, PART, P_NEAR,
       N_WORK };
enum { N_TABLES = 3 };

#define COPY(dst, src) memcpy((dst), (src), (size_t)n * sizeof(double))

static double nuts_step(model_t *m, bitgen_t *rng, double *q, double logp, double *grad,
                        double eps, const double *inv_mass, int64_t max_depth,
                        double max_energy_error, double *stats, double *work,
                        double *info) {
    int64_t n = m->n;
    double *w[N_WORK];
    for (int k = 0; k < N_WORK; k++) w[k] = work + (size_t)k * (size_t)n;
    double *p_ckpts = work + (size_t)N_WORK * (size_t)n;
    double *p_sum_ckpts = p_ckpts + (size_t)(max_depth + 1) * (size_t)n;
    double *p_prev_ckpts = p_sum_ckpts + (size_t)(max_depth + 1) * (size_t)n;
    double *p0 = w[P0], *q_left = w[Q_LEFT], *p_left = w[P_LEFT], *g_left = w[G_LEFT];
    double *q_right = w[Q_RIGHT], *p_right = w[P_RIGHT], *g_right = w[G_RIGHT];
    double *p_sum = w[P_SUM], *q_prop = w[Q_PROP], *g_prop = w[G_PROP];
    double *q_cur = w[Q_CUR], *p_cur = w[P_CUR], *g_cur = w[G_CUR];
    double *q_new = w[Q_NEW], *p_new = w[P_NEW], *g_new = w[G_NEW];
    double *sub_q = w[SUB_Q], *sub_g = w[SUB_G], *sub_p_sum = w[SUB_P_SUM], *part = w[PART];
    double *p_near = w[P_NEAR];

    for (int64_t i = 0; i < n; i++) p0[i] = random_standard_normal(rng) / sqrt(inv_mass[i]);
    double energy0 = -logp + kinetic(p0, inv_mass, n);
    COPY(q_left, q); COPY(p_left, p0); COPY(g_left, grad);
    COPY(q_right, q); COPY(p_right, p0); COPY(g_right, grad);
    COPY(p_sum, p0);
    double log_w = 0.0;
    COPY(q_prop, q); COPY(g_prop, grad);
    double logp_prop = logp;

    int64_t depth = 0, n_steps = 0;
    int diverging = 0;
    double sum_accept = 0.0, sum_symmetric = 0.0, max_error = 0.0, chosen_error = 0.0;
    int64_t idx_left = 0, idx_right = 0, idx_prop = 0, sub_idx = 0;
    while (depth < max_depth) {
        int forward = next_double(rng) < 0.5;
        double step = forward ? eps : -eps;
        int64_t idx_cur = forward ? idx_right : idx_left, idx_step = forward ? 1 : -1;
        if (forward) { COPY(q_cur, q_right); COPY(p_cur, p_right); COPY(g_cur, g_right); }
        else { COPY(q_cur, q_left); COPY(p_cur, p_left); COPY(g_cur, g_left); }
        COPY(p_near, p_cur);
        int64_t n_leaves = (int64_t)1 << depth;
        double sub_log_w = -INFINITY, sub_logp = 0.0, sub_error = 0.0;
        int sub_turning = 0;
        for (int64_t i = 0; i < n; i++) sub_p_sum[i] = 0.0;
        for (int64_t leaf = 0; leaf < n_leaves; leaf++) {
            int64_t idx_min, idx_max;
            ckpt_indices(leaf, &idx_min, &idx_max);
            if (leaf % 2 == 0 && leaf > 0) COPY(p_prev_ckpts + idx_max * n, p_cur);
            double leaf_logp = leapfrog(m, q_cur, p_cur, g_cur, step, inv_mass, q_new, p_new, g_new);
            n_steps++;
            idx_cur += idx_step;
            COPY(q_cur, q_new); COPY(p_cur, p_new); COPY(g_cur, g_new);
            double energy = -leaf_logp + kinetic(p_cur, inv_mass, n);
            double error = energy - energy0;
            if (!isfinite(error)) error = INFINITY;
            if (fabs(error) > max_error) max_error = fabs(error);
            sum_accept += error < INFINITY ? exp(min0(-error)) : 0.0;
            sum_symmetric += symmetric_accept(error);
            if (error > max_energy_error) { diverging = 1; break; }
            double leaf_w = -error;
            double new_sub_log_w = log_add_exp(sub_log_w, leaf_w);
            if (next_double(rng) < exp(leaf_w - new_sub_log_w)) {
                COPY(sub_q, q_cur); COPY(sub_g, g_cur);
                sub_logp = leaf_logp;
                sub_error = error;
                sub_idx = idx_cur;
            }
            sub_log_w = new_sub_log_w;
            for (int64_t i = 0; i < n; i++) sub_p_sum[i] += p_cur[i];
            if (leaf % 2 == 0) {
                COPY(p_ckpts + idx_max * n, p_cur);
                COPY(p_sum_ckpts + idx_max * n, sub_p_sum);
                if (leaf > 0) {
                    /* The first half (from checkpoint idx_max - 1) extended by this leaf. */
                    int64_t k = idx_max - 1;
                    for (int64_t i = 0; i < n; i++)
                        part[i] = sub_p_sum[i] - p_sum_ckpts[k * n + i] + p_ckpts[k * n + i];
                    if (is_turning(p_ckpts + k * n, p_cur, part, inv_mass, n)) {
                        sub_turning = 1;
                        break;
                    }
                }
            } else {
                for (int64_t k = idx_max; k > idx_min - 1; k--) {
                    for (int64_t i = 0; i < n; i++)
                        part[i] = sub_p_sum[i] - p_sum_ckpts[k * n + i] + p_ckpts[k * n + i];
                    if (is_turning(p_ckpts + k * n, p_cur, part, inv_mass, n)) {
                        sub_turning = 1;
                        break;
                    }
                    if (k < idx_max) {
                        /* The second half (from checkpoint k + 1) extended by the last
                         * leaf of the first half. */
                        const double *p_prev = p_prev_ckpts + (k + 1) * n;
                        for (int64_t i = 0; i < n; i++)
                            part[i] = (sub_p_sum[i] - p_sum_ckpts[(k + 1) * n + i] +
                                       p_ckpts[(k + 1) * n + i]) + p_prev[i];
                        if (is_turning(p_prev, p_cur, part, inv_mass, n)) {
                            sub_turning = 1;
                            break;
                        }
                    }
                }
                if (sub_turning) break;
            }
        }
        depth++;
        if (forward) {
            COPY(q_right, q_cur); COPY(p_right, p_cur); COPY(g_right, g_cur);
            idx_right = idx_cur;
        } else {
            COPY(q_left, q_cur); COPY(p_left, p_cur); COPY(g_left, g_cur);
            idx_left = idx_cur;
        }
        if (diverging || sub_turning) break;
        if (next_double(rng) < exp(min0(sub_log_w - log_w))) {
            COPY(q_prop, sub_q); COPY(g_prop, sub_g);
            logp_prop = sub_logp;
            chosen_error = sub_error;
            idx_prop = sub_idx;
        }
        log_w = log_add_exp(log_w, sub_log_w);
        /* U-turn checks across the merge (_nuts_core.nuts_step). */
        int turning = 0;
        if (n_leaves > 1) {
            const double *p_far = forward ? p_left : p_right;
            for (int64_t i = 0; i < n; i++) part[i] = p_sum[i] + p_ckpts[i];
            turning = is_turning(p_far, p_ckpts, part, inv_mass, n);
            if (!turning) {
                for (int64_t i = 0; i < n; i++) part[i] = sub_p_sum[i] + p_near[i];
                turning = is_turning(p_near, p_cur, part, inv_mass, n);
            }
        }
        for (int64_t i = 0; i < n; i++) p_sum[i] += sub_p_sum[i];
        if (turning || is_turning(p_left, p_right, p_sum, inv_mass, n)) break;
    }
    COPY(q, q_prop);
    COPY(grad, g_prop);
    stats[DIVERGING] = diverging ? 1.0 : 0.0;
    stats[ENERGY] = energy0 + chosen_error;
    stats[ENERGY_ERROR] = chosen_error;
    stats[MAX_ENERGY_ERROR] = max_error;
    stats[TREE_DEPTH] = (double)depth;
    stats[N_STEPS] = (double)n_steps;
    stats[STEP_SIZE] = eps;
    stats[ACCEPT] = sum_accept / (double)(n_steps > 1 ? n_steps : 1);
    stats[LP] = logp_prop;
    info[0] = (double)idx_prop;
    info[1] = sum_symmetric / (double)(n_steps > 1 ? n_steps : 1);
    return logp_prop;
}

static void dual_averaging(double *adapt, double accept, double target) {
    adapt[COUNT] += 1.0;
    double t = adapt[COUNT];
    double eta = 1.0 / (t + T0);
    adapt[H_BAR] = (1.0 - eta) * adapt[H_BAR] + eta * (target - accept);
    adapt[LOG_EPS] = adapt[MU] - sqrt(t) / GAMMA * adapt[H_BAR];
    double weight = pow(t - adapt[AVERAGE_FROM], -KAPPA);
    adapt[LOG_EPS_BAR] = weight * adapt[LOG_EPS] + (1.0 - weight) * adapt[LOG_EPS_BAR];
}

/* _nuts_core.welford_add: the point q and its gradient into the sums at row `row`. */
static void welford_add(double *welford, int64_t row, const double *q, const double *grad,
                        int64_t n) {
    double *w = welford + row * n;
    w[0] += 1.0;
    double count = w[0];
    for (int64_t i = 0; i < n; i++) {
        double delta = q[i] - w[n + i];
        w[n + i] += delta / count;
        w[2 * n + i] += delta * (q[i] - w[n + i]);
        delta = grad[i] - w[3 * n + i];
        w[3 * n + i] += delta / count;
        w[4 * n + i] += delta * (grad[i] - w[3 * n + i]);
    }
}

/* _nuts_core.grad_metric: inv_mass = sqrt(Var[points] / Var[gradients]) of the foreground. */
static void grad_metric(const double *welford, double *inv_mass, int64_t n) {
    const double *w = welford + FOREGROUND * n;
    if (w[0] < 3.0) return;
    for (int64_t i = 0; i < n; i++) {
        double var_g = w[4 * n + i];
        if (var_g > 0.0) {
            double ratio = sqrt(w[2 * n + i] / var_g);
            if (ratio > 0.0 && ratio < INFINITY) {
                double clamped = ratio < INV_MASS_LOWER ? INV_MASS_LOWER : ratio;
                inv_mass[i] = clamped > INV_MASS_UPPER ? INV_MASS_UPPER : clamped;
            }
        }
    }
}

/* The dense metric (kiln_samplers._dense_metric): the model's log-density in
 * coordinates y with x = L y, L lower triangular (row-major, n x n). NUTS with a
 * unit metric in y is NUTS with the metric L L^T in x, so every kernel runs a dense
 * metric unchanged, calling this function in the model's place (the same ABI). */
typedef struct {
    kiln_logp_fn fn;
    const void *user_data;
    const double *factor;
    double *x;    /* n: the point in the model's coordinates */
    double *grad; /* n: the model's gradient there */
} affine_t;

int kiln_affine_logp(size_t n, const double *y, double *grad, double *logp,
                     const void *user_data) {
    const affine_t *a = (const affine_t *)user_data;
    const double *factor = a->factor;
    for (size_t i = 0; i < n; i++) {
        double total = 0.0;
        for (size_t j = 0; j <= i; j++) total += factor[i * n + j] * y[j];
        a->x[i] = total;
    }
    int status = a->fn(n, a->x, a->grad, logp, a->user_data);
    for (size_t j = 0; j < n; j++) grad[j] = 0.0;
    for (size_t i = 0; i < n; i++) {
        double g = a->grad[i];
        for (size_t j = 0; j <= i; j++) grad[j] += factor[i * n + j] * g;
    }
    return status;
}

/* The model's gradient at each of the m rows of x (n columns) into the rows of grads, as
 * _nuts._Pieces.model_gradients computes them in Python. Returns 0, or the first fatal
 * code (< 0: the rows from that one on are not written). A rejected point's row is NaN. */
int kiln_gradients(kiln_logp_fn fn, const void *user_data, int64_t n, int64_t m,
                   const double *x, double *grads) {
    for (int64_t k = 0; k < m; k++) {
        double logp = 0.0;
        double *row = grads + k * n;
        int status = fn((size_t)n, x + k * n, row, &logp, user_data);
        if (status < 0) return status;
        if (status > 0)
            for (int64_t i = 0; i < n; i++) row[i] = NAN;
    }
    return 0;
}

/* _nuts_core.sample_chunk. Returns the last log-density; *status is 0, 1 when the work
 * arrays could not be allocated (nothing is drawn then), or the model's fatal code (< 0:
 * the chunk stopped after the transition that got it; *done says how many were drawn). */
double kiln_nuts_sample_chunk(
    kiln_logp_fn fn, const void *user_data, bitgen_t *rng, int64_t n, double *q,
    double *grad, double logp, double *inv_mass, double *adapt, double *welford,
    int64_t n_draws, double *draws, double *stats, double target_accept, int64_t max_depth,
    double max_energy_error, double jitter, int32_t adapt_step_size, int32_t collect_variance,
    int32_t update_metric, int32_t *status, int64_t *done) {
    model_t m = {fn, user_data, n, 0};
    size_t size =
        ((size_t)N_WORK + N_TABLES * (size_t)(max_depth + 1)) * (size_t)(n > 0 ? n : 1);
    double *work = malloc(size * sizeof(double));
    *done = 0;
    if (work == NULL) { *status = 1; return logp; }
    *status = 0;
    double info[2] = {0.0, 0.0};
    for (int64_t k = 0; k < n_draws; k++) {
        double eps = exp(adapt_step_size != ADAPT_OFF ? adapt[LOG_EPS] : adapt[LOG_EPS_BAR]);
        if (jitter > 0.0) eps *= 1.0 + jitter * (2.0 * next_double(rng) - 1.0);
        double *row = stats + k * N_STATS;
        logp = nuts_step(&m, rng, q, logp, grad, eps, inv_mass, max_depth, max_energy_error,
                         row, work, info);
        if (m.fatal) { *status = m.fatal; break; }
        if (adapt_step_size != ADAPT_OFF) {
            double accept = adapt_step_size == ADAPT_SYMMETRIC ? info[1] : row[ACCEPT];
            dual_averaging(adapt, isfinite(accept) ? accept : 0.0, target_accept);
        }
        int moved = row[DIVERGING] != 0.0 ? fabs(info[0]) > 4.0 : info[0] != 0.0;
        if (collect_variance && (moved || !update_metric)) welford_add(welford, 0, q, grad, n);
        if (update_metric && moved) {
            welford_add(welford, FOREGROUND, q, grad, n);
            grad_metric(welford, inv_mass, n);
        }
        memcpy(draws + k * n, q, (size_t)n * sizeof(double));
        *done = k + 1;
    }
    free(work);
    return logp;
}
