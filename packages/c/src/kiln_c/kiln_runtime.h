/* kiln's C runtime: array descriptors, buffers, errors and loop helpers.
 *
 * Pasted at the top of every generated translation unit (one file per graph, no
 * Python.h). A value of the graph is a kiln_array: a data pointer, dtype code, number
 * of dimensions, shape and strides (in bytes), and the reference-counted buffer it
 * lives in (NULL for memory the caller owns: inputs and constants). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <stdarg.h>
#include <math.h>

#define KILN_MAXDIM 8 /* kiln_c._runtime.MAXDIM */

/* A buffer's header, 32 bytes (its data follows, 16-byte aligned). `arena`: the block
 * lies in the call's arena (freed with it, never by free()). */
typedef struct kiln_buf {
    int64_t refs;
    void *data;
    int64_t arena;
    int64_t pad;
} kiln_buf;

typedef struct kiln_array {
    char *data;
    kiln_buf *buf;
    int64_t dtype;
    int64_t ndim;
    int64_t shape[KILN_MAXDIM];
    int64_t strides[KILN_MAXDIM];
} kiln_array;

/* Runs node `node` through Python (an Op without C code): reads `ins`, fills `outs`. */
typedef int (*kiln_callback)(int64_t node, kiln_array *ins, kiln_array *outs);

typedef struct kiln_ctx {
    kiln_callback fallback;
    int64_t node;    /* the node running (set before each node) */
    int64_t code;    /* 0, or the error class (KILN_E_...) */
    char message[512];
    void *const *blas; /* function pointers (dgemm, sgemm), or NULL */
    /* The call's arena (memory of its caller's stack frame), or NULL: buffers are cut
     * from it in order and vanish with it; what does not fit is malloc'd. */
    char *arena;
    int64_t arena_size;
    int64_t arena_used;
} kiln_ctx;

enum { KILN_E_INDEX = 1, KILN_E_SHAPE = 2, KILN_E_VALUE = 3, KILN_E_MEMORY = 4, KILN_E_PYTHON = 5,
       KILN_E_LINALG = 6 /* NumPy's LinAlgError */ };
enum { KILN_BOOL = 0, KILN_INT8, KILN_INT16, KILN_INT32, KILN_INT64, KILN_UINT8, KILN_UINT16,
       KILN_UINT32, KILN_UINT64, KILN_FLOAT32, KILN_FLOAT64, KILN_OBJECT };

static const int64_t kiln_itemsize[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8, 8};

static int kiln_fail(kiln_ctx *ctx, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->message, sizeof ctx->message, fmt, ap);
    va_end(ap);
    ctx->code = code;
    return code;
}

static void kiln_release(kiln_array *a) {
    kiln_buf *b = a->buf;
    a->buf = NULL;
    if (b != NULL && --b->refs == 0 && !b->arena) free(b);
}

static void kiln_clear(kiln_array *a) {
    a->buf = NULL;
    a->data = NULL;
}

/* `out` becomes a view of `in` (a new reference to its buffer). */
static void kiln_view(kiln_array *out, const kiln_array *in) {
    *out = *in;
    if (in->buf != NULL) in->buf->refs++;
}

static int64_t kiln_size(const kiln_array *a) {
    int64_t n = 1;
    for (int64_t d = 0; d < a->ndim; d++) n *= a->shape[d];
    return n;
}

static int kiln_is_contiguous(const kiln_array *a) {
    int64_t s = kiln_itemsize[a->dtype];
    for (int64_t d = a->ndim - 1; d >= 0; d--) {
        if (a->shape[d] != 1 && a->strides[d] != s) return 0;
        s *= a->shape[d];
    }
    return 1;
}

/* Whether the matrix `a` is the transpose of a C-contiguous one (Fortran order), and
 * not also C-contiguous. */
static int kiln_is_fortran(const kiln_array *a) {
    if (a->ndim != 2 || kiln_is_contiguous(a)) return 0;
    int64_t s = kiln_itemsize[a->dtype];
    return (a->shape[0] == 1 || a->strides[0] == s) &&
           (a->shape[1] == 1 || a->strides[1] == s * a->shape[0]);
}

/* A new C-contiguous array of `dtype` and `shape` in `out` (its own buffer). */
static int kiln_alloc(kiln_ctx *ctx, kiln_array *out, int64_t dtype, int64_t ndim,
                      const int64_t *shape) {
    if (ndim > KILN_MAXDIM)
        return kiln_fail(ctx, KILN_E_VALUE, "%lld dimensions; the C backend handles at most %d",
                         (long long)ndim, KILN_MAXDIM);
    int64_t n = 1;
    for (int64_t d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return kiln_fail(ctx, KILN_E_VALUE, "negative length %lld in dimension %lld",
                             (long long)shape[d], (long long)d);
        n *= shape[d];
    }
    /* One block: the buffer's header (32 bytes, keeping the data 16-byte aligned), then
     * the data; from the arena while it has room. */
    int64_t bytes = (int64_t)sizeof(kiln_buf) + (n > 0 ? n : 1) * kiln_itemsize[dtype];
    bytes = (bytes + 15) & ~(int64_t)15;
    kiln_buf *b;
    if (ctx->arena != NULL && ctx->arena_used + bytes <= ctx->arena_size) {
        b = (kiln_buf *)(ctx->arena + ctx->arena_used);
        ctx->arena_used += bytes;
        b->arena = 1;
    } else {
        b = (kiln_buf *)malloc((size_t)bytes);
        if (b == NULL)
            return kiln_fail(ctx, KILN_E_MEMORY, "cannot allocate %lld elements", (long long)n);
        b->arena = 0;
    }
    void *data = (void *)(b + 1);
    b->refs = 1;
    b->data = data;
    out->buf = b;
    out->data = (char *)data;
    out->dtype = dtype;
    out->ndim = ndim;
    int64_t s = kiln_itemsize[dtype];
    for (int64_t d = ndim - 1; d >= 0; d--) {
        out->shape[d] = shape[d];
        out->strides[d] = s;
        s *= shape[d] > 0 ? shape[d] : 1;
    }
    return 0;
}

/* Whether `out` may take over `in`'s buffer: it is the only reference, the buffer is
 * ours, and it is a C-contiguous array of `dtype` and `shape`. */
static int kiln_can_reuse(const kiln_array *in, int64_t dtype, int64_t ndim, const int64_t *shape) {
    if (in->buf == NULL || in->buf->refs != 1 || in->dtype != dtype || in->ndim != ndim) return 0;
    if ((void *)in->data != in->buf->data) return 0;
    for (int64_t d = 0; d < ndim; d++)
        if (in->shape[d] != shape[d]) return 0;
    return kiln_is_contiguous(in);
}

/* Advance the multi-index `idx` over the first `nd` dimensions of `shape` (the last
 * varying fastest), moving each of the `np` pointers by its strides. */
static void kiln_advance(int64_t nd, const int64_t *shape, int64_t *idx, int np, char **ptr,
                         int64_t (*strides)[KILN_MAXDIM]) {
    for (int64_t d = nd - 1; d >= 0; d--) {
        idx[d]++;
        for (int k = 0; k < np; k++) ptr[k] += strides[k][d];
        if (idx[d] < shape[d]) return;
        for (int k = 0; k < np; k++) ptr[k] -= strides[k][d] * shape[d];
        idx[d] = 0;
    }
}

/* The broadcast shape of `n` inputs of `nd` dimensions into `shape`, and each input's
 * strides (0 where it broadcasts: `bcast[i][d]`, a static length of 1). */
static int kiln_broadcast(kiln_ctx *ctx, int n, kiln_array **in, const uint8_t *bcast, int64_t nd,
                          int64_t *shape, int64_t (*strides)[KILN_MAXDIM]) {
    for (int64_t d = 0; d < nd; d++) {
        int first = -1;
        shape[d] = 1;
        for (int i = 0; i < n; i++) {
            if (bcast[i * nd + d]) continue;
            if (first < 0) {
                first = i;
                shape[d] = in[i]->shape[d];
            } else if (in[i]->shape[d] != shape[d]) {
                return kiln_fail(ctx, KILN_E_SHAPE,
                                 "input %d has length %lld in dimension %lld but input %d has "
                                 "length %lld; kiln broadcasts only dimensions whose static "
                                 "length is 1 (declare shape=(..., 1, ...) or use expand_dims)",
                                 i, (long long)in[i]->shape[d], (long long)d, first,
                                 (long long)shape[d]);
            }
        }
    }
    for (int i = 0; i < n; i++)
        for (int64_t d = 0; d < nd; d++)
            strides[i][d] = bcast[i * nd + d] ? 0 : in[i]->strides[d];
    return 0;
}

/* Exported helpers for the Python side. */
void kiln_buf_release(kiln_buf *b) {
    if (b != NULL && --b->refs == 0 && !b->arena) free(b);
}

int kiln_new_array(kiln_ctx *ctx, kiln_array *out, int64_t dtype, int64_t ndim,
                   const int64_t *shape) {
    return kiln_alloc(ctx, out, dtype, ndim, shape);
}

/* --- scalar functions with NumPy's semantics --------------------------------------- */

static inline double kiln_maximum(double a, double b) { return (a >= b || a != a) ? a : b; }
static inline double kiln_minimum(double a, double b) { return (a <= b || a != a) ? a : b; }
static inline float kiln_maximumf(float a, float b) { return (a >= b || a != a) ? a : b; }
static inline float kiln_minimumf(float a, float b) { return (a <= b || a != a) ? a : b; }

/* --- exp and log1p in float64 that the compiler vectorizes --------------------------------- *
 * C's exp and log1p are calls, one element at a time: a loop calling them is not SIMD code.
 * kiln_exp_v and kiln_log1p_v are arithmetic, comparisons, selects and bit casts only (no
 * branch on the data, no float-to-integer conversion), so that a loop calling them
 * vectorizes (with SSE2 already), and within 1 ulp of the C library over their whole domain
 * (infinities, NaN, signed zeros and subnormals included); the algorithms of kiln_numba's
 * _vector_math. Generated loops of 128 elements or more call them for float64 Exp and Log1p
 * where the whole loop can be SIMD code (one element at a time they take about twice the C
 * library's time: kiln_c.scalar.simd_or_scalar).
 * The same bits from every compiler that keeps the arithmetic as written (no contraction):
 * tcc's quick build and gcc's optimised one agree. The coefficients are exact hexadecimal
 * literals (1/k! and 2/(2k+3)), no decimal parsing involved. */
/* A function whose loops call them is compiled three times by gcc on x86-64 ELF (SSE2,
 * AVX2, AVX-512), the copy for the machine picked when the library loads (an ifunc): the
 * library stays shareable between machines of one architecture and runs 8 lanes wide
 * where it can. Every copy computes the same bits (no contraction into fused
 * multiply-adds: -ffp-contract=off). Other compilers compile it once. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__TINYC__) && defined(__x86_64__) && \
    defined(__ELF__)
#define KILN_VECTOR_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#else
#define KILN_VECTOR_CLONES
#endif
/* Before a loop whose iterations depend on no other's (each reads its inputs and writes
 * its outputs at its own index, in buffers that do not overlap): gcc then vectorizes it
 * without runtime overlap checks (which its -O2 cost model refuses), as it does not with
 * restrict pointers declared in a block. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__TINYC__)
#define KILN_IVDEP _Pragma("GCC ivdep")
#else
#define KILN_IVDEP
#endif
typedef union kiln_f64_bits {
    double d;
    uint64_t u;
} kiln_f64_bits;
static inline uint64_t kiln_bits(double x) {
    kiln_f64_bits b;
    b.d = x;
    return b.u;
}
static inline double kiln_from_bits(uint64_t u) {
    kiln_f64_bits b;
    b.u = u;
    return b.d;
}
/* 1.5 * 2**52: adding it to |t| < 2**51 rounds t to an integer k (to nearest, ties to
 * even), held in the low bits of the sum: bits(t + M) - bits(M) is k as an int64. */
#define KILN_ROUND_MAGIC 0x1.8p52
#define KILN_LN2_HI 0x1.62e42fee00000p-1 /* 32 trailing zero bits: k * HI exact, |k| < 2**11 */
#define KILN_LN2_LO 0x1.a39ef35793c76p-33
/* exp(r) = sum r**k / k!, k = 13 .. 0 (Horner's order). */
static const double kiln_exp_taylor[14] = {
    0x1.6124613a86d09p-33, 0x1.1eed8eff8d898p-29, 0x1.ae64567f544e4p-26, 0x1.27e4fb7789f5cp-22,
    0x1.71de3a556c734p-19, 0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-13, 0x1.6c16c16c16c17p-10,
    0x1.1111111111111p-7, 0x1.5555555555555p-5, 0x1.5555555555555p-3, 0x1.0000000000000p-1,
    0x1.0000000000000p+0, 0x1.0000000000000p+0};
/* 2 / (2k + 3), k = 11 .. 0 (Horner's order): atanh's series, see kiln_log1p_v. */
static const double kiln_atanh_taylor[12] = {
    0x1.47ae147ae147bp-4, 0x1.642c8590b2164p-4, 0x1.8618618618618p-4, 0x1.af286bca1af28p-4,
    0x1.e1e1e1e1e1e1ep-4, 0x1.1111111111111p-3, 0x1.3b13b13b13b14p-3, 0x1.745d1745d1746p-3,
    0x1.c71c71c71c71cp-3, 0x1.2492492492492p-2, 0x1.999999999999ap-2, 0x1.5555555555555p-1};

/* (double)x, the same bits (one rounding, of the exact sum of two exactly converted
 * halves), from integer and float operations that SSE2 and AVX2 have for 64-bit lanes. */
static inline double kiln_i64_to_f64(int64_t x) {
    const uint64_t u = (uint64_t)x;
    const double hi = kiln_from_bits(0x4330000000000000ULL | ((u >> 32) ^ 0x80000000ULL)) -
                      (0x1p52 + 0x1p31); /* the high half, signed */
    const double lo = kiln_from_bits(0x4330000000000000ULL | (u & 0xFFFFFFFFULL)) - 0x1p52;
    return hi * 0x1p32 + lo;
}

/* exp(x): x = k ln2 + r with |r| <= ln2/2 (ln2 in two parts), exp(r) by its Taylor series
 * to degree 13, scaled by 2**k in two factors 2**k1 2**k2 (subnormal results rounded once). */
static inline double kiln_exp_v(double x) {
    double xc = x > -746.0 ? x : -746.0;
    xc = xc < 710.0 ? xc : 710.0;
    const double shifted = xc * 0x1.71547652b82fep+0 + KILN_ROUND_MAGIC; /* x log2(e) */
    const double k = shifted - KILN_ROUND_MAGIC;
    const int64_t ki = (int64_t)(kiln_bits(shifted) - kiln_bits(KILN_ROUND_MAGIC));
    const double r = (xc - k * KILN_LN2_HI) - k * KILN_LN2_LO;
    double p = kiln_exp_taylor[0];
    p = p * r + kiln_exp_taylor[1];
    p = p * r + kiln_exp_taylor[2];
    p = p * r + kiln_exp_taylor[3];
    p = p * r + kiln_exp_taylor[4];
    p = p * r + kiln_exp_taylor[5];
    p = p * r + kiln_exp_taylor[6];
    p = p * r + kiln_exp_taylor[7];
    p = p * r + kiln_exp_taylor[8];
    p = p * r + kiln_exp_taylor[9];
    p = p * r + kiln_exp_taylor[10];
    p = p * r + kiln_exp_taylor[11];
    p = p * r + kiln_exp_taylor[12];
    p = p * r + kiln_exp_taylor[13];
    const int64_t k1 = (int64_t)(kiln_bits(k * 0.5 + KILN_ROUND_MAGIC) - kiln_bits(KILN_ROUND_MAGIC));
    const int64_t k2 = ki - k1;
    double y = p * kiln_from_bits((uint64_t)(k1 + 1023) << 52) *
               kiln_from_bits((uint64_t)(k2 + 1023) << 52);
    y = x > 0x1.62e42fefa39efp+9 ? INFINITY : y; /* exp overflows above 709.78... */
    return x != x ? x : y;
}

/* log1p(x): u = 1 + x = m 2**e with m in [sqrt(2)/2, sqrt(2)); log(m) = 2 atanh(s),
 * s = f / (2 + f), f = m - 1, as f - (f**2/2 - s (f**2/2 + z q(z))), z = s**2, plus
 * e ln2 and the rounding error of 1 + x to first order, (x - (u - 1)) / u. */
static inline double kiln_log1p_v(double x) {
    const double u = 1.0 + x;
    const uint64_t bits = kiln_bits(u);
    /* the biased exponent, as a double without a conversion instruction */
    const double e0 = kiln_from_bits(kiln_bits(KILN_ROUND_MAGIC) + ((bits >> 52) & 0x7FF)) -
                      (KILN_ROUND_MAGIC + 1023.0);
    const double m0 = kiln_from_bits((bits & 0x000FFFFFFFFFFFFFULL) | 0x3FF0000000000000ULL);
    const double m = m0 > 0x1.6a09e667f3bcdp+0 ? 0.5 * m0 : m0;
    const double e = m0 > 0x1.6a09e667f3bcdp+0 ? e0 + 1.0 : e0;
    const double f = m - 1.0;
    const double s = f / (2.0 + f);
    const double z = s * s;
    double q = kiln_atanh_taylor[0];
    q = q * z + kiln_atanh_taylor[1];
    q = q * z + kiln_atanh_taylor[2];
    q = q * z + kiln_atanh_taylor[3];
    q = q * z + kiln_atanh_taylor[4];
    q = q * z + kiln_atanh_taylor[5];
    q = q * z + kiln_atanh_taylor[6];
    q = q * z + kiln_atanh_taylor[7];
    q = q * z + kiln_atanh_taylor[8];
    q = q * z + kiln_atanh_taylor[9];
    q = q * z + kiln_atanh_taylor[10];
    q = q * z + kiln_atanh_taylor[11];
    const double half_f2 = 0.5 * f * f;
    const double log_m = f - (half_f2 - s * (half_f2 + z * q));
    const double c = (x - (u - 1.0)) / u;
    double y = e * KILN_LN2_HI + (log_m + (e * KILN_LN2_LO + c));
    y = u == 1.0 ? x : y; /* |x| < 2**-53: log1p(x) rounds to x (and keeps -0.0) */
    y = u == 0.0 ? -INFINITY : y;
    y = u == INFINITY ? INFINITY : y;
    y = u < 0.0 ? kiln_from_bits(0x7FF8000000000000ULL) : y; /* one NaN for every compiler */
    return x != x ? x : y;
}

static inline double kiln_fmod_py(double a, double b) {
    if (b == 0) return fmod(a, b);
    double m = fmod(a, b);
    if (m != 0) {
        if ((b < 0) != (m < 0)) m += b;
    } else {
        m = copysign(0.0, b);
    }
    return m;
}

static inline double kiln_floordiv(double a, double b) {
    if (b == 0) return a / b;
    double m = fmod(a, b);
    double div = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) div -= 1.0;
    double fl;
    if (div != 0) {
        fl = floor(div);
        if (div - fl > 0.5) fl += 1.0;
    } else {
        fl = copysign(0.0, a / b);
    }
    return fl;
}

static inline int64_t kiln_floordiv_i(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}

static inline int64_t kiln_mod_i(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    int64_t m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}

static inline uint64_t kiln_floordiv_u(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b; }
static inline uint64_t kiln_mod_u(uint64_t a, uint64_t b) { return b == 0 ? 0 : a % b; }

static inline int64_t kiln_pow_i(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
    uint64_t r = 1, x = (uint64_t)a;
    while (b) {
        if (b & 1) r *= x;
        x *= x;
        b >>= 1;
    }
    return (int64_t)r;
}

static inline double kiln_sign(double a) { return a != a ? a : (double)((a > 0) - (a < 0)); }

static inline double kiln_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static inline float kiln_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

static inline double kiln_logaddexp(double x, double y) {
    if (x == y) return x + 0.693147180559945309417232121458176568;
    double t = x - y;
    if (t > 0) return x + log1p(exp(-t));
    if (t <= 0) return y + log1p(exp(t));
    return t;
}

static inline float kiln_logaddexpf(float x, float y) {
    if (x == y) return x + 0.693147180559945309417232121458176568f;
    float t = x - y;
    if (t > 0) return x + log1pf(expf(-t));
    if (t <= 0) return y + log1pf(expf(t));
    return t;
}

static inline double kiln_log1mexp(double x) {
    return x < -0.693147180559945309417232121458176568 ? log1p(-exp(x)) : log(-expm1(x));
}
static inline float kiln_log1mexpf(float x) {
    return x < -0.693147180559945309417232121458176568f ? log1pf(-expf(x)) : logf(-expm1f(x));
}

static inline double kiln_logit(double x) { return log(x / (1.0 - x)); }
static inline float kiln_logitf(float x) { return logf(x / (1.0f - x)); }

/* --- indexing and copies --------------------------------------------------------------- */

/* The value of a 0-d integer (or bool) array. */
static int64_t kiln_index_value(const kiln_array *a) {
    switch (a->dtype) {
    case KILN_BOOL: case KILN_UINT8: return *(const uint8_t *)a->data;
    case KILN_INT8: return *(const int8_t *)a->data;
    case KILN_INT16: return *(const int16_t *)a->data;
    case KILN_INT32: return *(const int32_t *)a->data;
    case KILN_UINT16: return *(const uint16_t *)a->data;
    case KILN_UINT32: return *(const uint32_t *)a->data;
    case KILN_UINT64: return (int64_t)*(const uint64_t *)a->data;
    case KILN_FLOAT32: return (int64_t)*(const float *)a->data;
    case KILN_FLOAT64: return (int64_t)*(const double *)a->data;
    default: return *(const int64_t *)a->data;
    }
}

/* Element `k` of an integer vector `a`. */
static int64_t kiln_index_at(const kiln_array *a, int64_t k) {
    kiln_array e = *a;
    e.data = a->data + k * a->strides[0];
    e.ndim = 0;
    return kiln_index_value(&e);
}

enum { KILN_IDX_INT = 0, KILN_IDX_SLICE = 1, KILN_IDX_NEWAXIS = 2 };

/* `out` = the view x[index] of basic indexing: `n` entries of `kind`; an int entry's
 * value is start[e]; a slice's parts are start/stop/step[e] where `has` bits 1/2/4
 * say they are given (Python's slice rules). */
static int kiln_subview(kiln_ctx *ctx, kiln_array *out, const kiln_array *x, int n, const int *kind,
                        const int64_t *start, const int64_t *stop, const int64_t *step,
                        const int *has) {
    kiln_view(out, x);
    int64_t dx = 0, nd = 0;
    char *data = x->data;
    for (int e = 0; e < n; e++) {
        if (kind[e] == KILN_IDX_NEWAXIS) {
            out->shape[nd] = 1;
            out->strides[nd++] = 0;
            continue;
        }
        int64_t len = x->shape[dx], stride = x->strides[dx];
        if (kind[e] == KILN_IDX_INT) {
            int64_t i = start[e];
            if (i < -len || i >= len) {
                kiln_release(out);
                return kiln_fail(ctx, KILN_E_INDEX,
                                 "index %lld is out of bounds for axis %lld with size %lld",
                                 (long long)i, (long long)dx, (long long)len);
            }
            if (i < 0) i += len;
            data += i * stride;
            dx++;
            continue;
        }
        int64_t st = (has[e] & 4) ? step[e] : 1;
        if (st == 0) {
            kiln_release(out);
            return kiln_fail(ctx, KILN_E_VALUE, "slice step cannot be zero");
        }
        int64_t lo, hi;
        if (has[e] & 1) {
            lo = start[e];
            if (lo < 0) { lo += len; if (lo < 0) lo = st < 0 ? -1 : 0; }
            else if (lo >= len) lo = st < 0 ? len - 1 : len;
        } else {
            lo = st < 0 ? len - 1 : 0;
        }
        if (has[e] & 2) {
            hi = stop[e];
            if (hi < 0) { hi += len; if (hi < 0) hi = st < 0 ? -1 : 0; }
            else if (hi >= len) hi = st < 0 ? len - 1 : len;
        } else {
            hi = st < 0 ? -1 : len;
        }
        int64_t count = 0;
        if (st < 0) { if (hi < lo) count = (lo - hi - 1) / (-st) + 1; }
        else if (lo < hi) count = (hi - lo - 1) / st + 1;
        if (count > 0) data += lo * stride;
        out->shape[nd] = count;
        out->strides[nd++] = stride * st;
        dx++;
    }
    for (; dx < x->ndim; dx++) {
        out->shape[nd] = x->shape[dx];
        out->strides[nd++] = x->strides[dx];
    }
    out->ndim = nd;
    out->data = data;
    return 0;
}

/* `out` = a new C-contiguous copy of `x`. */
static int kiln_copy(kiln_ctx *ctx, kiln_array *out, const kiln_array *x) {
    if (kiln_alloc(ctx, out, x->dtype, x->ndim, x->shape)) return ctx->code;
    int64_t n = kiln_size(x), size = kiln_itemsize[x->dtype];
    if (n == 0) return 0;
    if (kiln_is_contiguous(x)) {
        memcpy(out->data, x->data, (size_t)(n * size));
        return 0;
    }
    char *p[1] = {x->data};
    int64_t st[1][KILN_MAXDIM];
    int64_t idx[KILN_MAXDIM] = {0};
    for (int64_t d = 0; d < x->ndim; d++) st[0][d] = x->strides[d];
    for (int64_t k = 0; k < n; k++) {
        memcpy(out->data + k * size, p[0], (size_t)size);
        kiln_advance(x->ndim, x->shape, idx, 1, p, st);
    }
    return 0;
}

/* Move `a` out of the call's arena (a malloc'd copy) when it lies there: an output that
 * outlives the call. */
static int kiln_to_heap(kiln_ctx *ctx, kiln_array *a) {
    if (a->buf == NULL || !a->buf->arena) return 0;
    char *arena = ctx->arena;
    kiln_array copy;
    ctx->arena = NULL;
    int status = kiln_copy(ctx, &copy, a);
    ctx->arena = arena;
    if (status) return status;
    kiln_release(a);
    *a = copy;
    return 0;
}

/* The strides that broadcast `y` (right-aligned; `ybc[d]`: static length 1) over
 * `shape` (`nd` dimensions), into `st`. */
static int kiln_update_strides(kiln_ctx *ctx, const kiln_array *y, const uint8_t *ybc, int64_t nd,
                               const int64_t *shape, int64_t *st) {
    int64_t off = nd - y->ndim;
    if (off < 0)
        return kiln_fail(ctx, KILN_E_SHAPE, "y has %lld dimensions but the indexed region has %lld",
                         (long long)y->ndim, (long long)nd);
    for (int64_t d = 0; d < nd; d++) {
        if (d < off) { st[d] = 0; continue; }
        int64_t yd = d - off;
        if (y->shape[yd] == shape[d]) st[d] = y->strides[yd];
        else if (ybc[yd] && y->shape[yd] == 1) st[d] = 0;
        else
            return kiln_fail(ctx, KILN_E_SHAPE,
                             "y has length %lld in dimension %lld but the indexed region x[...] "
                             "has %lld; kiln broadcasts y only along dimensions whose static "
                             "length is 1", (long long)y->shape[yd], (long long)yd,
                             (long long)shape[d]);
    }
    return 0;
}

/* --- arrays straight from Python ------------------------------------------------------- */

/* The head of NumPy's array object (PyArrayObject_fields of numpy/ndarraytypes.h, the
 * same in NumPy 1.x and 2.x) on a 64-bit CPython without free threading. kiln_c checks
 * this layout against a probe array when it loads a library (kiln_c._numpy_abi) and
 * describes arrays from Python when it does not hold. */
typedef struct kiln_pyarray {
    intptr_t refcnt;
    const void *type;
    char *data;
    int nd;
    int64_t *dims;
    int64_t *strides;
    void *base;
    const void *descr;
    int flags;
} kiln_pyarray;

#define KILN_NPY_ALIGNED 0x0100

/* What kiln_call takes besides the arrays: one pointer, so that a call converts few
 * arguments. */
typedef struct kiln_call_head {
    kiln_ctx *ctx;
    kiln_array *in;
    kiln_array *out;
    const void *const *expect;
} kiln_call_head;

/* A field of the NumPy array `x` (0 data, 1 nd, 2 first length, 3 first stride, 4 descr,
 * 5 type, 6 flags), for the layout check. */
int64_t kiln_probe(const kiln_pyarray *x, int64_t what) {
    switch (what) {
    case 0: return (int64_t)(intptr_t)x->data;
    case 1: return x->nd;
    case 2: return x->dims[0];
    case 3: return x->strides[0];
    case 4: return (int64_t)(intptr_t)x->descr;
    case 5: return (int64_t)(intptr_t)x->type;
    default: return x->flags;
    }
}

/* Describe the NumPy array `x` in `a` if it is an aligned ndarray (`expect[0]`) of the
 * dtype `expect[1]` with `nd` dimensions; 0 when it is not. */
static int kiln_take(kiln_array *a, const kiln_pyarray *x, const void *const *expect, int nd) {
    if (x->type != expect[0] || x->descr != expect[1] || x->nd != nd || nd > KILN_MAXDIM ||
        !(x->flags & KILN_NPY_ALIGNED))
        return 0;
    a->data = x->data;
    a->ndim = nd;
    for (int d = 0; d < nd; d++) {
        a->shape[d] = x->dims[d];
        a->strides[d] = x->strides[d];
    }
    return 1;
}

/* Copy `src` into the NumPy array `dst` (of its dtype and shape), then release `src`. */
static int kiln_copy_into(kiln_ctx *ctx, kiln_array *src, const kiln_pyarray *dst) {
    if (dst->nd != src->ndim)
        return kiln_fail(ctx, KILN_E_SHAPE, "an output has %lld dimensions, not the %d of its type",
                         (long long)src->ndim, dst->nd);
    for (int d = 0; d < dst->nd; d++)
        if (dst->dims[d] != src->shape[d])
            return kiln_fail(ctx, KILN_E_SHAPE, "an output has length %lld in dimension %d, not "
                             "the %lld of its type", (long long)src->shape[d], d,
                             (long long)dst->dims[d]);
    int64_t n = kiln_size(src), size = kiln_itemsize[src->dtype];
    if (kiln_is_contiguous(src)) {
        memcpy(dst->data, src->data, (size_t)(n * size));
    } else {
        char *p[1] = {src->data};
        int64_t st[1][KILN_MAXDIM];
        int64_t idx[KILN_MAXDIM] = {0};
        for (int64_t d = 0; d < src->ndim; d++) st[0][d] = src->strides[d];
        for (int64_t k = 0; k < n; k++) {
            memcpy(dst->data + k * size, p[0], (size_t)size);
            kiln_advance(src->ndim, src->shape, idx, 1, p, st);
        }
    }
    kiln_release(src);
    return 0;
}

/* --- the native log-density ABI ----------------------------------------------------------- */

/* What `user_data` points at for kiln_native_logp / kiln_native_expand: each function's
 * argument descriptors (the point's slot first, then shared values and constants). */
typedef struct kiln_native_data {
    const kiln_array *logp_args;
    int64_t logp_nargs;
    const kiln_array *expand_args;
    int64_t expand_nargs;
    void *const *blas;
} kiln_native_data;

static double kiln_as_double(const char *p, int64_t dtype) {
    switch (dtype) {
    case KILN_BOOL: case KILN_UINT8: return *(const uint8_t *)p;
    case KILN_INT8: return *(const int8_t *)p;
    case KILN_INT16: return *(const int16_t *)p;
    case KILN_INT32: return *(const int32_t *)p;
    case KILN_INT64: return (double)*(const int64_t *)p;
    case KILN_UINT16: return *(const uint16_t *)p;
    case KILN_UINT32: return *(const uint32_t *)p;
    case KILN_UINT64: return (double)*(const uint64_t *)p;
    case KILN_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
    }
}

/* Write `a` (any dtype, any strides) into `dst` as float64 values in C order. */
static void kiln_write_doubles(const kiln_array *a, double *dst) {
    int64_t n = kiln_size(a);
    char *p[1] = {a->data};
    int64_t st[1][KILN_MAXDIM];
    int64_t idx[KILN_MAXDIM] = {0};
    for (int64_t d = 0; d < a->ndim; d++) st[0][d] = a->strides[d];
    for (int64_t k = 0; k < n; k++) {
        dst[k] = kiln_as_double(p[0], a->dtype);
        kiln_advance(a->ndim, a->shape, idx, 1, p, st);
    }
}

/* digamma(x): shifted above 6 by the recurrence, then the asymptotic series; the
 * reflection formula below 0 (SciPy's values at the poles: NaN at negative integers,
 * -inf at +0 and +inf at -0). */
static double kiln_digamma(double x) {
    if (x == 0) return copysign(INFINITY, -x);
    if (x < 0) {
        if (x == floor(x)) return NAN;
        const double pi = 3.14159265358979323846264338327950288;
        return kiln_digamma(1.0 - x) - pi / tan(pi * x);
    }
    double r = 0.0;
    while (x < 6.0) {
        r -= 1.0 / x;
        x += 1.0;
    }
    double f = 1.0 / (x * x);
    double t = f * (-1.0 / 12 + f * (1.0 / 120 + f * (-1.0 / 252 + f * (1.0 / 240 + f * (-1.0 / 132 + f * (691.0 / 32760 + f * (-1.0 / 12)))))));
    return r + log(x) - 0.5 / x + t;
}
static float kiln_digammaf(float x) { return (float)kiln_digamma((double)x); }
