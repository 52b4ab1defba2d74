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
