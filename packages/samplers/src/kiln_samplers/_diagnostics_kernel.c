/* Rank-normalized split R-hat and bulk ESS of sorted rows: the arithmetic of
 * kiln_samplers/_diagnostics.py after its sort, one row at a time.
 *
 * Built into the library of the C NUTS kernel (kiln_samplers._c_nuts). NumPy sorts the
 * rows (its argsort is vectorized); this file does the rest in a few linear passes per
 * row, where NumPy needs some thirty array operations and their temporaries: the
 * normal scores of the average ranks, the chains' moments, the folded ranks (a merge of
 * the two sorted runs either side of the median, not a second sort), the bulk and tail
 * R-hat, and the bulk ESS from autocovariances summed lag by lag until Geyer's initial
 * positive sequence stops. A row whose sequence runs past max_lag lags is left to
 * NumPy's transforms (status 1); the caller recomputes it.
 *
 * A row is chains split halves of draws values each, laid end to end. The numbers are
 * _diagnostics.rhat_ess's up to rounding (sums in another order); a test compares them.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* (((c[0] r + c[1]) r + c[2]) ... ) r + c[7]: Horner's scheme, highest degree first. */
static double horner8(const double *c, double r) {
    double v = c[0];
    for (int i = 1; i < 8; i++) v = v * r + c[i];
    return v;
}

/* The standard normal quantile of p in (0, 1): Wichura's AS241 (PPND16), Applied
 * Statistics 37 (1988) 477-484, in the order statistics.NormalDist.inv_cdf computes it. */
static double ndtri(double p) {
    static const double A[8] = {2.5090809287301226727e+3, 3.3430575583588128105e+4,
                                6.7265770927008700853e+4, 4.5921953931549871457e+4,
                                1.3731693765509461125e+4, 1.9715909503065514427e+3,
                                1.3314166789178437745e+2, 3.3871328727963666080e+0};
    static const double B[8] = {5.2264952788528545610e+3, 2.8729085735721942674e+4,
                                3.9307895800092710610e+4, 2.1213794301586595867e+4,
                                5.3941960214247511077e+3, 6.8718700749205790830e+2,
                                4.2313330701600911252e+1, 1.0};
    static const double C[8] = {7.7454501427834140764e-4, 2.2723844989269184583e-2,
                                2.4178072517745061177e-1, 1.2704582524523683826e+0,
                                3.6478483247632045282e+0, 5.7694972214606914055e+0,
                                4.6303378461565452959e+0, 1.4234371107496835773e+0};
    static const double D[8] = {1.0507500716444168432e-9, 5.4759380849953449460e-4,
                                1.5198666563616457197e-2, 1.4810397642748007459e-1,
                                6.8976733498510000455e-1, 1.6763848301838038494e+0,
                                2.0531916266377588219e+0, 1.0};
    static const double E[8] = {2.0103343992922881327e-7, 2.7115555687434875782e-5,
                                1.2426609473880784386e-3, 2.6532189526576123093e-2,
                                2.9656057182850489123e-1, 1.7848265399172913358e+0,
                                5.4637849111641143699e+0, 6.6579046435011037772e+0};
    static const double F[8] = {2.0442631033899397856e-15, 1.4215117583164458887e-7,
                                1.8463183175100546818e-5, 7.8686913114561325910e-4,
                                1.4875361290850614853e-2, 1.3692988092273580531e-1,
                                5.9983220655588793769e-1, 1.0};
    double q = p - 0.5;
    if (fabs(q) <= 0.425) {
        double r = 0.180625 - q * q;
        return horner8(A, r) * q / horner8(B, r);
    }
    double r = sqrt(-log(q <= 0.0 ? p : 1.0 - p)), x;
    if (r <= 5.0)
        x = horner8(C, r - 1.6) / horner8(D, r - 1.6);
    else
        x = horner8(E, r - 5.0) / horner8(F, r - 5.0);
    return q < 0.0 ? -x : x;
}

/* z[at[j]] = the normal score of the average rank of ordered[j] (ordered ascending);
 * scores[j] is the score of rank j + 1, used where a value is not tied. */
static void z_scale(int64_t size, const int64_t *at, const double *ordered,
                    const double *scores, double *z) {
    int64_t a = 0;
    while (a < size) {
        int64_t b = a;
        while (b + 1 < size && ordered[b + 1] == ordered[b]) b++;
        if (a == b) {
            z[at[a]] = scores[a];
        } else {
            double rank = (double)(a + b) / 2.0 + 1.0;
            double score = ndtri((rank - 0.375) / ((double)size + 0.25));
            for (int64_t j = a; j <= b; j++) z[at[j]] = score;
        }
        a = b + 1;
    }
}

/* Each split chain's mean and variance (ddof 1) of z, as _diagnostics._chain_moments. */
static void chain_moments(const double *z, int64_t chains, int64_t draws, double *mean,
                          double *var) {
    for (int64_t c = 0; c < chains; c++) {
        const double *x = z + c * draws;
        double sum = 0.0, squares = 0.0;
        for (int64_t i = 0; i < draws; i++) {
            sum += x[i];
            squares += x[i] * x[i];
        }
        mean[c] = sum / (double)draws;
        var[c] = (squares - (double)draws * mean[c] * mean[c]) / (double)(draws - 1);
    }
}

/* The variance (ddof 1) of the chains' means. */
static double between_var(const double *mean, int64_t chains) {
    double m = 0.0, s = 0.0;
    for (int64_t c = 0; c < chains; c++) m += mean[c];
    m /= (double)chains;
    for (int64_t c = 0; c < chains; c++) s += (mean[c] - m) * (mean[c] - m);
    return s / (double)(chains - 1);
}

static double rhat_of(const double *mean, const double *var, int64_t chains, int64_t draws) {
    double within = 0.0;
    for (int64_t c = 0; c < chains; c++) within += var[c];
    within /= (double)chains;
    double between = (double)draws * between_var(mean, chains);
    return sqrt((between / within + (double)draws - 1.0) / (double)draws);
}

/* The chains' mean autocovariance at lag t of the centred z (divided by draws). */
static double mean_acov(const double *z, int64_t chains, int64_t draws, int64_t t) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    for (int64_t c = 0; c < chains; c++) {
        const double *x = z + c * draws, *y = x + t;
        int64_t n = draws - t, i = 0;
        for (; i + 4 <= n; i += 4) {
            s0 += x[i] * y[i];
            s1 += x[i + 1] * y[i + 1];
            s2 += x[i + 2] * y[i + 2];
            s3 += x[i + 3] * y[i + 3];
        }
        for (; i < n; i++) s0 += x[i] * y[i];
    }
    return ((s0 + s1) + (s2 + s3)) / (double)chains / (double)draws;
}

/* The bulk ESS of the centred z (Geyer's initial monotone sequence, as _diagnostics._ess),
 * or NAN when the sequence runs past max_lag lags. */
static double ess_of(const double *z, int64_t chains, int64_t draws, const double *mean,
                     int64_t max_lag) {
    double total = (double)(chains * draws);
    double acov0 = mean_acov(z, chains, draws, 0);
    double mean_var = acov0 * (double)draws / ((double)draws - 1.0);
    double var_plus = mean_var * ((double)draws - 1.0) / (double)draws;
    if (chains > 1) var_plus += between_var(mean, chains);
    int64_t last = draws >= 3 ? (draws - 3) / 2 : 0;
    double sum = 0.0, monotone = INFINITY, even = 1.0, pair = 0.0;
    int64_t stop = last;
    for (int64_t j = 0; j <= last; j++) {
        if (2 * j + 1 > max_lag) return NAN;
        even = j == 0 ? 1.0 : 1.0 - (mean_var - mean_acov(z, chains, draws, 2 * j)) / var_plus;
        double odd = 1.0 - (mean_var - mean_acov(z, chains, draws, 2 * j + 1)) / var_plus;
        pair = even + odd;
        if (pair <= 0.0) {
            stop = j;
            break;
        }
        if (j == last) break;
        monotone = pair < monotone ? pair : monotone;
        sum += monotone;
    }
    double tail = (stop == 0 || pair >= 0.0 || even > 0.0) ? even : 0.0;
    double tau = -1.0 + 2.0 * sum + tail;
    double floor = 1.0 / log10(total);
    return total / (tau > floor ? tau : floor);
}

/* R-hat (the larger of bulk and tail) and bulk ESS of k rows of chains x draws values.
 *
 * values: the rows, (k, chains * draws); order: each row's ascending order (positions
 * within the row, NumPy's argsort); scores: the normal scores of the ranks 1 .. chains *
 * draws; work: 3 * chains * draws + 2 * chains doubles. status[r] is 0 where rhat[r] and
 * ess[r] are set, 1 where the row is left to NumPy (its ESS needs more than max_lag
 * lags). Every row must be free of NaN. */
void kiln_rank_rhat_ess(int64_t k, int64_t chains, int64_t draws, const double *values,
                        const int64_t *order, const double *scores, int64_t max_lag,
                        double *work, double *rhat, double *ess, int8_t *status) {
    int64_t size = chains * draws;
    double *ordered = work, *z = work + size, *mean = work + 2 * size, *var = mean + chains;
    int64_t *merged = (int64_t *)(var + chains), *folded_at = merged;
    for (int64_t r = 0; r < k; r++) {
        const double *row = values + r * size;
        const int64_t *at = order + r * size;
        for (int64_t j = 0; j < size; j++) ordered[j] = row[at[j]];
        z_scale(size, at, ordered, scores, z);
        chain_moments(z, chains, draws, mean, var);
        double bulk = rhat_of(mean, var, chains, draws);
        status[r] = 0;
        if (ordered[0] == ordered[size - 1]) {
            ess[r] = (double)size; /* constant: as ArviZ */
        } else {
            for (int64_t c = 0; c < chains; c++)
                for (int64_t i = 0; i < draws; i++) z[c * draws + i] -= mean[c];
            ess[r] = ess_of(z, chains, draws, mean, max_lag);
            if (isnan(ess[r])) {
                status[r] = 1;
                continue;
            }
        }
        /* The folded values |x - median| in ascending order: the positions below the
         * median, read backwards, merged with those above (ties: the lower run first). */
        double median = 0.5 * (ordered[(size - 1) / 2] + ordered[size / 2]);
        int64_t below = 0;
        while (below < size && ordered[below] < median) below++;
        int64_t lo = below - 1, hi = below, m = 0;
        while (lo >= 0 || hi < size) {
            double left = lo >= 0 ? median - ordered[lo] : INFINITY;
            double right = hi < size ? ordered[hi] - median : INFINITY;
            merged[m++] = (lo >= 0 && (hi >= size || left <= right)) ? lo-- : hi++;
        }
        /* their values into z (the bulk scores are done with), their rows' positions
         * over the merge's */
        for (m = 0; m < size; m++) {
            int64_t j = merged[m];
            z[m] = j < below ? median - ordered[j] : ordered[j] - median;
            folded_at[m] = at[j];
        }
        /* ordered[] (no longer needed) takes the folded values' scores */
        z_scale(size, folded_at, z, scores, ordered);
        chain_moments(ordered, chains, draws, mean, var);
        double tail = rhat_of(mean, var, chains, draws);
        rhat[r] = tail > bulk ? tail : bulk;
    }
}
