/*
 * Reference kernels of attention's row-wise ops over the channels of each
 * pixel (a token's features, a row of attention scores): Deeploy's integer
 * softmaxes (tsr_softmax's other modes, called from elementwise.c) and
 * layer normalization. Each core takes a contiguous share of the rows.
 * The arithmetic is the golden model's (site_scons/tessera/golden/ops.py):
 * Deeploy's in its kernels' own 32-bit widths, which the frontend checked
 * no value leaves.
 */
#include "ref_common.h"
#include "tessera/attention.h"

/* iSoftmax's exponential of d = x - max (<= 0), in its kernel's widths */
static inline uint32_t isoftmax_exp(const tsr_softmax_args_t *a, int32_t d)
{
    const int32_t log2 = a->params[3];
    int32_t z = -d / log2;                      /* C's division of d, negated */
    if (z > 31)
        z = 31;
    const int32_t p = d + z * log2 + a->params[1];
    return (uint32_t)((uint64_t)((int64_t)(a->params[0] * (p * p)) + a->params[2]) >> z);
}

void tsr_softmax_deeploy_row(const tsr_softmax_args_t *a, const int8_t *x, int8_t *y)
{
    const int32_t n = a->c;
    int32_t max = -128, j;
    for (j = 0; j < n; j++)
        if (x[j] > max)
            max = x[j];
    if (a->mode == TSR_SOFTMAX_ISOFTMAX) {
        /* the exponentials twice rather than a row buffer on the cores' small stacks */
        const uint32_t levels = (uint32_t)a->params[4];
        uint32_t sum = 0;
        for (j = 0; j < n; j++)
            sum += isoftmax_exp(a, x[j] - max);
        for (j = 0; j < n; j++)
            y[j] = (int8_t)((int32_t)((isoftmax_exp(a, x[j] - max) * (levels - 1)) / sum) - 128);
        return;
    }
    if (a->mode == TSR_SOFTMAX_ITAMAX) {
        const uint32_t levels = (uint32_t)a->params[0];
        uint32_t sum = 0, inv;
        for (j = 0; j < n; j++)
            sum += 256u >> ((max - x[j] + 16) >> 5);
        inv = ((levels - 1) * 256u) / sum;
        for (j = 0; j < n; j++)
            y[j] = (int8_t)((int32_t)(inv >> ((max - x[j] + 16) >> 5)) - 128);
        return;
    }
    {   /* TSR_SOFTMAX_ITAPARTIALMAX: the sum group by group, rescaled by each new maximum */
        const int32_t group = a->params[0];
        const uint32_t levels = (uint32_t)a->params[1];
        uint32_t sum = 0, inv;
        int32_t gmax = -128, g, k;
        for (g = 0; g < n / group; g++) {
            const int8_t *blk = x + g * group;
            int32_t cmax = -128, rescale = 0;
            uint32_t part = 0;
            for (k = 0; k < group; k++)
                if (blk[k] > cmax)
                    cmax = blk[k];
            if (cmax > gmax) {
                rescale = (cmax - gmax + 16) >> 5;
                gmax = cmax;
            }
            for (k = 0; k < group; k++)
                part += 256u >> ((gmax - blk[k] + 16) >> 5);
            sum = (sum >> rescale) + part;
        }
        inv = ((levels / 2 - 1) * 256u) / sum;
        for (j = 0; j < n; j++)
            y[j] = (int8_t)((int32_t)(inv >> ((gmax - x[j] + 16) >> 5)) - 128);
    }
}

uint64_t tsr_isqrt64(uint64_t v)
{
    /* bit by bit, from the highest even power of four not above v */
    uint64_t r = 0, bit = (uint64_t)1 << 62;
    while (bit > v)
        bit >>= 2;
    while (bit) {
        if (v >= r + bit) {
            v -= r + bit;
            r = (r >> 1) + bit;
        } else {
            r >>= 1;
        }
        bit >>= 2;
    }
    return r;
}

static int64_t trunc_div(int64_t a, int64_t b)
{
    return a / b;   /* C rounds toward zero, as Deeploy's kernel */
}

void tsr_layernorm_row(const tsr_layernorm_args_t *a, const int8_t *x, int8_t *y)
{
    const int32_t n = a->c, off = a->input_offset;
    int64_t s1 = 0;
    int32_t j;
    if (a->mode == TSR_LAYERNORM_INT) {
        int64_t s2 = 0, r;
        uint64_t d;
        int32_t f, sh;
        if (n <= 4096 && off >= -256 && off <= 256) {
            /* |xo| <= 384: both sums in 32 bits (n * 384^2 < 2^31) */
            int32_t t1 = 0, t2 = 0;
            for (j = 0; j < n; j++) {
                const int32_t v = x[j] + off;
                t1 += v;
                t2 += v * v;
            }
            s1 = t1, s2 = t2;
        } else {
            for (j = 0; j < n; j++) {
                const int64_t v = x[j] + off;
                s1 += v;
                s2 += v * v;
            }
        }
        d = ((uint64_t)(n * s2 - s1 * s1) << 16) + (uint64_t)a->eps;
        f = (62 - (64 - __builtin_clzll(d))) / 2;   /* D << 2f just below 2^62: 1 / sqrt to 30 bits */
        r = (int64_t)(((uint64_t)1 << 62) / tsr_isqrt64(d << (2 * f)));
        sh = 38 - f;
        if (a->rq->rounding == TSR_ROUND_HALF_UP && a->rq->divisor <= 1 && !a->rq->elem.plane && r < ((int64_t)1 << 32)) {
            /* the usual case inline, the channel's requantization without a
             * call per value. With |num| < 2^15 (num = n * xo - S1, |num| <=
             * 255 n and n <= 128) and sh >= 17 the normalization needs no
             * 64-bit product: R = rh 2^16 + rl, num * rh and num * rl fit 32
             * bits, and floor((num R + 2^(sh-1)) / 2^sh) =
             * floor((num rh + 2^(sh-17) + floor(num rl / 2^16)) / 2^(sh-16)). */
            const tsr_requant_t *rq = a->rq;
            const int64_t rnd = (int64_t)1 << (sh - 1);
            const int split = n <= 128 && sh >= 17 && (off >= -128 && off <= 127);
            const int32_t rh = (int32_t)((uint32_t)r >> 16), rl = (int32_t)((uint32_t)r & 0xFFFF);
            const int32_t hr = split ? (int32_t)1 << (sh - 17) : 0;
            for (j = 0; j < n; j++) {
                const int32_t num = n * (x[j] + off) - (int32_t)s1;
                const int32_t acc = split ? (num * rh + hr + ((num * rl) >> 16)) >> (sh - 16)
                                          : (int32_t)(((int64_t)num * (int64_t)(uint32_t)r + rnd) >> sh);
                const int32_t k = rq->per_channel ? j : 0, s = rq->shift[k];
                int64_t v = (int64_t)acc * rq->mul[k] + (rq->add ? rq->add[k] : 0) + (s > 0 ? (int64_t)1 << (s - 1) : 0);
                v = (v >> s) + rq->zero_point;
                y[j] = (int8_t)(v < rq->lo ? rq->lo : v > rq->hi ? rq->hi : v);
            }
            return;
        }
        for (j = 0; j < n; j++) {
            /* |n * xo - S1| < 2^31 and R <= 2^32 (equal only when D << 2f
             * is 2^60): a signed x unsigned 32-bit product (mulhsu on
             * RISC-V), plus num * 2^32 in that one case */
            const int32_t num = n * (x[j] + off) - (int32_t)s1;
            const int64_t v = (int64_t)num * (int64_t)(uint32_t)r + ((r >> 32) ? (int64_t)num * ((int64_t)1 << 32) : 0);
            y[j] = (int8_t)tsr_requantize((int32_t)((v + ((int64_t)1 << (sh - 1))) >> sh), a->rq, j);
        }
        return;
    }
    for (j = 0; j < n; j++)
        s1 += x[j] + off;
    {   /* TSR_LAYERNORM_DEEPLOY */
        const int32_t mean = (int32_t)trunc_div(s1, n);
        int32_t var = 0, std;
        for (j = 0; j < n; j++) {
            const int32_t t = x[j] + off - mean;
            var += t * t;
        }
        std = (int32_t)tsr_isqrt64((uint64_t)(var / n + 1));
        for (j = 0; j < n; j++) {
            const int64_t t = x[j] + off - mean;
            int64_t v = (trunc_div(t * a->weight[j], std) + a->bias[j]) >> a->rq->shift[0];
            if (v < a->rq->lo) v = a->rq->lo;
            if (v > a->rq->hi) v = a->rq->hi;
            y[j] = (int8_t)v;
        }
    }
}

void tsr_layernorm(const tsr_layernorm_args_t *a, int core, int ncores)
{
    int32_t p0, p1, p;
    tsr_ref_share(a->pixels, core, ncores, &p0, &p1);
    for (p = p0; p < p1; p++)
        tsr_layernorm_row(a, a->in + (size_t)p * a->c, a->out + (size_t)p * a->c);
}
