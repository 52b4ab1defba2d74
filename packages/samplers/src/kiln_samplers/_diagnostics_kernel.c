/* Rank-normalized split R-hat and bulk ESS: what kiln_samplers/_diagnostics.py computes
 * with NumPy, and the screen of kiln_samplers._results._screened_rhat_ess, in one call.
 *
 * Built into the library of the C NUTS kernel (kiln_samplers._c_nuts) and called through
 * ctypes without the GIL: kl.sample runs it in another thread while it builds the
 * DataTree. Each element is read where it lies (an address and two strides), sorted
 * (a radix sort), and its statistics come from a few linear passes where NumPy needs
 * some thirty array operations and their temporaries: the normal scores of the average
 * ranks, the chains' moments, the folded ranks (a merge of the two sorted runs either
 * side of the median, not a second sort), the bulk and tail R-hat, and the bulk ESS
 * from autocovariances summed lag by lag until Geyer's initial positive sequence
 * stops. An element whose sequence runs past max_lag lags is left to NumPy's
 * transforms (status 2); the caller computes it.
 *
 * The numbers are _diagnostics.rhat_ess's up to rounding (sums in another order); a
 * test compares them, and both to ArviZ's.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* The positions of v[0..n) in ascending order, ties in order of position: a merge sort
 * (spare: n words). */
static void merge_sort(const double *v, int64_t n, int64_t *order, int64_t *spare) {
    int64_t *src = order, *dst = spare;
    for (int64_t i = 0; i < n; i++) order[i] = i;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = v[src[j]] < v[src[i]] ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != order) memcpy(order, src, (size_t)n * sizeof(int64_t));
}

/* The bits of x as an unsigned integer that orders as x does (-0.0 just below 0.0). */
static uint64_t ordered_bits(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return (b >> 63) ? ~b : b | ((uint64_t)1 << 63);
}

/* The positions of v[0..n) in ascending order (ties keep their order), into order.
 *
 * A stable LSD radix sort, three passes of 11 bits, of one word per value: the value's
 * order-preserving bits, less the smallest value's, shifted to the 32 bits below the
 * highest bit in which the values differ, above the value's position. Values closer
 * than the range over 2^32 can come out of order; an insertion sort by the values
 * themselves puts them back (a few moves: values that close are rare), and a merge
 * sort takes over where they are not rare (values on a grid finer than that). keys,
 * spare: n words each. */
static void argsort(const double *v, int64_t n, int64_t *order, uint64_t *keys,
                    uint64_t *spare) {
    if (n <= 0) return;
    if (n > (int64_t)UINT32_MAX) { /* (a position takes 32 bits) */
        merge_sort(v, n, order, (int64_t *)spare);
        return;
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t b = ordered_bits(v[i]);
        keys[i] = b;
        lo = b < lo ? b : lo;
        hi = b > hi ? b : hi;
    }
    int top = 63;
    while (top >= 0 && !(((lo ^ hi) >> top) & 1)) top--;
    int low = top > 31 ? top - 31 : 0; /* the sorted bits: low .. top (none: all equal) */
    static const int shift[3] = {32, 43, 54};    /* three digits: 11, 11 and 10 bits */
    static const uint64_t digit[3] = {2047, 2047, 1023};
    uint32_t count[3][2048];
    memset(count, 0, sizeof count);
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = top < 0 ? 0 : (keys[i] - lo) >> low;
        keys[i] = (k << 32) | (uint64_t)i;
        count[0][k & 2047]++;
        count[1][(k >> 11) & 2047]++;
        count[2][k >> 22]++;
    }
    uint64_t *src = keys, *dst = spare;
    for (int d = 0; d < 3; d++) {
        int s = shift[d];
        uint64_t mask = digit[d];
        uint32_t *c = count[d];
        if (c[(src[0] >> s) & mask] == (uint32_t)n) continue; /* one digit for all */
        uint32_t sum = 0;
        for (uint64_t b = 0; b <= mask; b++) {
            uint32_t t = c[b];
            c[b] = sum;
            sum += t;
        }
        for (int64_t i = 0; i < n; i++) dst[c[(src[i] >> s) & mask]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    for (int64_t i = 0; i < n; i++) order[i] = (int64_t)(src[i] & 0xffffffffu);
    int64_t moves = 0;
    for (int64_t i = 1; i < n; i++) {
        int64_t at = order[i], j = i;
        double x = v[at];
        while (j > 0 && x < v[order[j - 1]]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = at;
        moves += i - j;
        if (moves > 8 * n) { /* not rare: sort them properly */
            merge_sort(v, n, order, (int64_t *)spare);
            return;
        }
    }
}

/* The merge of the two sorted runs of |ordered[j] - median| (positions below `below`,
 * read backwards, and the rest), ties taking the lower run first: their values into
 * value[], their rows' positions (at[j]) into value_at[]. Without branches (which run
 * comes next is a coin toss) and from both ends at once: two independent chains of
 * loads and compares, each meeting the other in the middle. */
static void fold_merge(int64_t size, int64_t below, double median, const double *ordered,
                       const int64_t *at, double *value, int64_t *value_at) {
    int64_t lo = below - 1, hi = below;   /* the front: the smallest not yet taken */
    int64_t lb = 0, hb = size - 1;        /* the back: the largest not yet taken */
    int64_t back = size - size / 2, front = size / 2;
    for (int64_t k = 0; k < back; k++) {
        double l = median - ordered[lb < below ? lb : 0];
        double r = ordered[hb >= below ? hb : size - 1] - median;
        l = lb < below ? l : -INFINITY;
        r = hb >= below ? r : -INFINITY;
        int64_t take_r = r >= l; /* (a tie: the upper run's goes last) */
        value[size - 1 - k] = take_r ? r : l;
        value_at[size - 1 - k] = at[take_r ? hb : lb];
        hb -= take_r;
        lb += 1 - take_r;
        if (k < front) {
            double l2 = median - ordered[lo >= 0 ? lo : 0];
            double r2 = ordered[hi < size ? hi : size - 1] - median;
            l2 = lo >= 0 ? l2 : INFINITY;
            r2 = hi < size ? r2 : INFINITY;
            int64_t take_l = l2 <= r2;
            value[k] = take_l ? l2 : r2;
            value_at[k] = at[take_l ? lo : hi];
            lo -= take_l;
            hi += 1 - take_l;
        }
    }
}

/* R-hat (the larger of bulk and tail) and bulk ESS of one row of chains x draws values
 * (the split chains end to end), given its ascending order at. Returns 0, or 1 when
 * the ESS needs more than max_lag lags (nothing set: the row is left to NumPy). work:
 * 3 * chains * draws + 2 * chains doubles. The row must be free of NaN. */
static int row_rhat_ess(int64_t chains, int64_t draws, const double *row, const int64_t *at,
                        const double *scores, int64_t max_lag, double *work, double *rhat,
                        double *ess) {
    int64_t size = chains * draws;
    double *ordered = work, *z = work + size, *mean = work + 2 * size, *var = mean + chains;
    int64_t *folded_at = (int64_t *)(var + chains);
    for (int64_t j = 0; j < size; j++) ordered[j] = row[at[j]];
    z_scale(size, at, ordered, scores, z);
    chain_moments(z, chains, draws, mean, var);
    double bulk = rhat_of(mean, var, chains, draws);
    if (ordered[0] == ordered[size - 1]) {
        *ess = (double)size; /* constant: as ArviZ */
    } else {
        for (int64_t c = 0; c < chains; c++)
            for (int64_t i = 0; i < draws; i++) z[c * draws + i] -= mean[c];
        *ess = ess_of(z, chains, draws, mean, max_lag);
        if (isnan(*ess)) return 1;
    }
    /* The folded values |x - median| in ascending order, into z (the bulk scores are
     * done with), their rows' positions into folded_at: the values below the median,
     * read backwards, merged with those above (ties: the lower run first). */
    double median = 0.5 * (ordered[(size - 1) / 2] + ordered[size / 2]);
    int64_t below = 0, above = size; /* below: the first position not < median */
    while (below < above) {
        int64_t mid = below + (above - below) / 2;
        if (ordered[mid] < median)
            below = mid + 1;
        else
            above = mid;
    }
    fold_merge(size, below, median, ordered, at, z, folded_at);
    /* ordered[] (no longer needed) takes the folded values' scores */
    z_scale(size, folded_at, z, scores, ordered);
    chain_moments(ordered, chains, draws, mean, var);
    double tail = rhat_of(mean, var, chains, draws);
    *rhat = tail > bulk ? tail : bulk;
    return 0;
}

/* One element's draws t * step, t < kept, of each chain, split in halves (the middle
 * draw of an odd count dropped), laid end to end into row. Returns whether one is NaN.
 * The element's draw (c, t) is at base + c * chain_stride + t * draw_stride bytes. */
static int gather_row(const char *base, int64_t chain_stride, int64_t draw_stride,
                      int64_t chains, int64_t kept, int64_t step, double *row) {
    int64_t half = kept / 2;
    int nan_found = 0;
    for (int64_t c = 0; c < chains; c++) {
        const char *chain = base + c * chain_stride;
        for (int h = 0; h < 2; h++) {
            int64_t first = h == 0 ? 0 : kept - half;
            double *out = row + (2 * c + h) * half;
            for (int64_t j = 0; j < half; j++) {
                double x;
                memcpy(&x, chain + (first + j) * step * draw_stride, sizeof x);
                out[j] = x;
                nan_found |= isnan(x);
            }
        }
    }
    return nan_found;
}

/* One element's R-hat and ESS on its draws t * step, t < kept (see gather_row). Returns
 * 0 (set; NaN where a draw is NaN), or 1 (left to NumPy: see row_rhat_ess). */
static int element_rhat_ess(const char *base, int64_t chain_stride, int64_t draw_stride,
                            int64_t chains, int64_t kept, int64_t step, const double *scores,
                            int64_t max_lag, double *work, double *rhat, double *ess) {
    int64_t size = 2 * chains * (kept / 2);
    double *row = work, *pass_work = work + size;
    int64_t *order = (int64_t *)(pass_work + 3 * size + 4 * chains);
    uint64_t *keys = (uint64_t *)(order + size), *spare = keys + size;
    if (gather_row(base, chain_stride, draw_stride, chains, kept, step, row)) {
        *rhat = *ess = NAN;
        return 0;
    }
    argsort(row, size, order, keys, spare);
    return row_rhat_ess(2 * chains, kept / 2, row, order, scores, max_lag, pass_work, rhat,
                        ess);
}

/* R-hat (rank-normalized, split; the larger of bulk and tail) and bulk ESS of n elements
 * of chains x draws draws each, as kiln_samplers._results._screened_rhat_ess computes
 * them: with step >= 2, each element is first screened on its draws t * step, t <
 * kept; the elements whose screen gives an R-hat above rhat_above (or NaN) or an ESS
 * below ess_below, and with extremes the ones of the largest R-hat and the smallest
 * ESS, are then computed on every draw. With step < 2, every element on every draw.
 *
 * Element i's draw (c, d) is the double at address[i] + c * chain_stride[i] + d *
 * draw_stride[i] (bytes). scores: the normal scores of ranks 1 .. 2 * chains *
 * (draws / 2); kept_scores the same for 2 * chains * (kept / 2) (read with step >= 2).
 * work: 7 * 2 * chains * (draws / 2) + 4 * chains doubles. status[i]: 0 where rhat[i]
 * and ess[i] are the screen's, 1 where they are computed on every draw, 2 where the
 * values on every draw are left to NumPy (an ESS needing more than max_lag lags). NaN
 * where a draw read is NaN. Thread-safe. */
static void kiln_screened_rhat_ess(int64_t n, int64_t chains, int64_t draws, const int64_t *address,
                            const int64_t *chain_stride, const int64_t *draw_stride,
                            int64_t step, int64_t kept, double rhat_above, double ess_below,
                            int extremes, const double *scores, const double *kept_scores,
                            int64_t max_lag, double *work, double *rhat, double *ess,
                            int8_t *status) {
    int64_t worst_rhat = -1, worst_ess = -1;
    int finite_rhat = 0, finite_ess = 0; /* (NumPy's nanargmax needs a finite value) */
    for (int64_t i = 0; i < n; i++) {
        status[i] = 1;
        if (step < 2) continue;
        const char *base = (const char *)(intptr_t)address[i];
        int left = element_rhat_ess(base, chain_stride[i], draw_stride[i], chains, kept, step,
                                    kept_scores, max_lag, work, &rhat[i], &ess[i]);
        if (left) continue; /* the screen's ESS runs long: every draw, as a suspect */
        int suspect = !(rhat[i] <= rhat_above) || ess[i] < ess_below;
        if (!suspect) status[i] = 0;
        if (!isnan(rhat[i]) && (worst_rhat < 0 || rhat[i] > rhat[worst_rhat])) worst_rhat = i;
        if (!isnan(ess[i]) && (worst_ess < 0 || ess[i] < ess[worst_ess])) worst_ess = i;
        finite_rhat |= isfinite(rhat[i]);
        finite_ess |= isfinite(ess[i]);
    }
    if (extremes && step >= 2) {
        if (finite_rhat) status[worst_rhat] = 1;
        if (finite_ess) status[worst_ess] = 1;
    }
    for (int64_t i = 0; i < n; i++) {
        if (status[i] != 1) continue;
        const char *base = (const char *)(intptr_t)address[i];
        if (element_rhat_ess(base, chain_stride[i], draw_stride[i], chains, draws, 1, scores,
                             max_lag, work, &rhat[i], &ess[i]))
            status[i] = 2;
    }
}

/* kiln_screened_rhat_ess in a thread of its own (a POSIX thread: it never needs the
 * GIL, so it runs while the caller's Python thread works): the arguments are copied,
 * and every array they point to must live until kiln_screened_rhat_ess_join returns.
 * Returns the handle to join; NULL when no thread could be started, in which case the
 * work is done before returning (joining NULL does nothing). */
typedef struct {
    int64_t n, chains, draws;
    const int64_t *address, *chain_stride, *draw_stride;
    int64_t step, kept;
    double rhat_above, ess_below;
    int extremes;
    const double *scores, *kept_scores;
    int64_t max_lag;
    double *work, *rhat, *ess;
    int8_t *status;
    pthread_t thread;
} screened_call_t;

static void *screened_thread(void *arg) {
    screened_call_t *c = (screened_call_t *)arg;
    kiln_screened_rhat_ess(c->n, c->chains, c->draws, c->address, c->chain_stride,
                           c->draw_stride, c->step, c->kept, c->rhat_above, c->ess_below,
                           c->extremes, c->scores, c->kept_scores, c->max_lag, c->work,
                           c->rhat, c->ess, c->status);
    return NULL;
}

void *kiln_screened_rhat_ess_start(int64_t n, int64_t chains, int64_t draws,
                                   const int64_t *address, const int64_t *chain_stride,
                                   const int64_t *draw_stride, int64_t step, int64_t kept,
                                   double rhat_above, double ess_below, int extremes,
                                   const double *scores, const double *kept_scores,
                                   int64_t max_lag, double *work, double *rhat, double *ess,
                                   int8_t *status) {
    screened_call_t *c = (screened_call_t *)malloc(sizeof *c);
    if (c != NULL) {
        screened_call_t call = {n, chains, draws, address, chain_stride, draw_stride, step,
                                kept, rhat_above, ess_below, extremes, scores, kept_scores,
                                max_lag, work, rhat, ess, status};
        *c = call;
        if (pthread_create(&c->thread, NULL, screened_thread, c) == 0) return c;
        free(c);
    }
    kiln_screened_rhat_ess(n, chains, draws, address, chain_stride, draw_stride, step, kept,
                           rhat_above, ess_below, extremes, scores, kept_scores, max_lag, work,
                           rhat, ess, status);
    return NULL;
}

/* Wait for the thread of kiln_screened_rhat_ess_start (its handle; NULL: nothing). */
void kiln_screened_rhat_ess_join(void *handle) {
    if (handle == NULL) return;
    screened_call_t *c = (screened_call_t *)handle;
    pthread_join(c->thread, NULL);
    free(c);
}
