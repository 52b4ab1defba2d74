/* NumPy's libnpyrandom: the distributions of numpy.random.Generator over a bit
 * generator's bitgen_t (numpy/random/lib/libnpyrandom.a, linked into the library).
 * Declared here as NumPy's numpy/random/bitgen.h and distributions.h declare them (those
 * headers include Python.h); pasted only into files that draw (kiln_c.random). */
typedef struct bitgen {
    void *state;
    uint64_t (*next_uint64)(void *st);
    uint32_t (*next_uint32)(void *st);
    double (*next_double)(void *st);
    uint64_t (*next_raw)(void *st);
} bitgen_t;

/* The cache random_binomial keeps of its last (n, p): set up from them alone. */
typedef struct s_binomial_t {
    int has_binomial;
    double psave;
    int64_t nsave;
    double r, q, fm;
    int64_t m;
    double p1, xm, xl, xr, c, laml, lamr, p2, p3, p4;
} binomial_t;

extern double random_normal(bitgen_t *bitgen_state, double loc, double scale);
extern double random_lognormal(bitgen_t *bitgen_state, double mean, double sigma);
extern double random_uniform(bitgen_t *bitgen_state, double lower, double range);
extern double random_exponential(bitgen_t *bitgen_state, double scale);
extern double random_gamma(bitgen_t *bitgen_state, double shape, double scale);
extern double random_beta(bitgen_t *bitgen_state, double a, double b);
extern double random_standard_t(bitgen_t *bitgen_state, double df);
extern double random_standard_cauchy(bitgen_t *bitgen_state);
extern double random_laplace(bitgen_t *bitgen_state, double loc, double scale);
extern double random_logistic(bitgen_t *bitgen_state, double loc, double scale);
extern double random_weibull(bitgen_t *bitgen_state, double a);
extern int64_t random_binomial(bitgen_t *bitgen_state, double p, int64_t n, binomial_t *binomial);
extern int64_t random_poisson(bitgen_t *bitgen_state, double lam);
extern int64_t random_negative_binomial(bitgen_t *bitgen_state, double n, double p);
extern int64_t random_geometric(bitgen_t *bitgen_state, double p);
extern double random_standard_uniform(bitgen_t *bitgen_state);
extern double random_standard_normal(bitgen_t *bitgen_state);
extern double random_standard_exponential(bitgen_t *bitgen_state);

/* kiln_random's core_fn draws written in C: the same calls of the generator (random(),
 * standard_normal(), standard_exponential()) in the same order, the same arithmetic
 * (files are built with -ffp-contract=off), hence the VM's draws to the bit. */

/* TruncatedNormalRV.core_fn: Robert's (1995) rejection samplers. */
static double kiln_truncated_normal(bitgen_t *bg, double mu, double sigma, double lower,
                                    double upper) {
    const double sqrt_2pi = sqrt(2.0 * 3.141592653589793);
    double a = (lower - mu) / sigma, b = (upper - mu) / sigma, z;
    int flip = b <= 0.0;
    if (flip) {
        double t = a;
        a = -b;
        b = -t;
    }
    if (a <= 0.0) {
        if (b - a >= sqrt_2pi) {
            do z = random_standard_normal(bg);
            while (!(a <= z && z <= b));
        } else {
            for (;;) {
                z = a + (b - a) * random_standard_uniform(bg);
                if (random_standard_uniform(bg) <= exp(-0.5 * z * z)) break;
            }
        }
    } else if ((b - a) * (a + b) < 2.0) {
        for (;;) {
            z = a + (b - a) * random_standard_uniform(bg);
            if (random_standard_uniform(bg) <= exp(0.5 * (a * a - z * z))) break;
        }
    } else {
        double alpha = 0.5 * (a + sqrt(a * a + 4.0));
        for (;;) {
            z = a + random_standard_exponential(bg) / alpha;
            if (z <= b && random_standard_uniform(bg) <= exp(-0.5 * (z - alpha) * (z - alpha)))
                break;
        }
    }
    if (flip) z = -z;
    return mu + sigma * z;
}

/* VonMisesRV.core_fn: Best and Fisher's (1979) sampler, wrapped into [-pi, pi]. */
static double kiln_vonmises(bitgen_t *bg, double mu, double kappa) {
    const double pi = 3.141592653589793;
    double theta;
    if (kappa > 1e6) {
        theta = random_standard_normal(bg) / sqrt(kappa);
    } else {
        double s = 0.5 / kappa, r = s + sqrt(1.0 + s * s), w;
        for (;;) {
            double z = cos(pi * random_standard_uniform(bg));
            w = (1.0 + r * z) / (r + z);
            double c = kappa * (r - w), u = random_standard_uniform(bg);
            if (c * (2.0 - c) > u || log(c / u) + 1.0 >= c) break;
        }
        double clipped = w < -1.0 ? -1.0 : w; /* Python's min(max(w, -1.0), 1.0) */
        theta = acos(1.0 < clipped ? 1.0 : clipped);
        if (random_standard_uniform(bg) < 0.5) theta = -theta;
    }
    double x = mu + theta;
    return x - 2.0 * pi * floor((x + pi) / (2.0 * pi));
}

/* HyperGeometricRV.core_fn: n draws without replacement from the urn. */
static int64_t kiln_hypergeometric(bitgen_t *bg, int64_t N, int64_t k, int64_t n) {
    int64_t good = k, total = N, drawn = 0;
    for (int64_t i = 0; i < n; i++) {
        if (random_standard_uniform(bg) * (double)total < (double)good) {
            drawn++;
            good--;
        }
        total--;
    }
    return drawn;
}

/* CategoricalRV.core_fn over p[0], p[stride], ... (k entries): 0, or 1 (an entry not
 * >= 0) or 2 (no positive sum), drawing nothing then. */
/* The sum of p's k entries in *total: 0, or 1 (an entry not >= 0) or 2 (no positive sum). */
static int kiln_p_total(const char *p, int64_t stride, int64_t k, double *total) {
    *total = 0.0;
    for (int64_t i = 0; i < k; i++) {
        double v = *(const double *)(p + i * stride);
        if (!(v >= 0.0)) return 1;
        *total += v;
    }
    return *total > 0.0 ? 0 : 2;
}

static int kiln_categorical(bitgen_t *bg, const char *p, int64_t stride, int64_t k,
                            int64_t *out) {
    double total;
    int bad = kiln_p_total(p, stride, k, &total);
    if (bad) return bad;
    double u = random_standard_uniform(bg) * total, acc = 0.0;
    for (int64_t i = 0; i < k - 1; i++) {
        acc += *(const double *)(p + i * stride);
        if (u < acc) {
            *out = i;
            return 0;
        }
    }
    *out = k - 1;
    return 0;
}

/* MultinomialRV.core_fn: the counts of n draws into out[0..k-1] by successive
 * binomials (Generator.binomial's random_binomial); status as kiln_categorical's, and
 * 3 for no category. */
static int kiln_multinomial(bitgen_t *bg, int64_t n, const char *p, int64_t stride,
                            int64_t k, int64_t *out, binomial_t *binomial) {
    if (k == 0) return 3;
    double total;
    int bad = kiln_p_total(p, stride, k, &total);
    if (bad) return bad;
    int64_t remaining = n;
    for (int64_t i = 0; i < k - 1; i++) {
        double pi = *(const double *)(p + i * stride);
        double q = total > 0.0 ? pi / total : 0.0;
        int64_t x = remaining > 0 ? random_binomial(bg, 1.0 < q ? 1.0 : q, remaining, binomial) : 0;
        out[i] = x;
        remaining -= x;
        total -= pi;
    }
    out[k - 1] = remaining;
    return 0;
}
