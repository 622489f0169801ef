/*
 * The Xpulpv2 path of pnn_matmul (see matmul.c for the arithmetic): the K
 * loop of each 4 channel x 2 pixel block is a hardware loop of
 * post-increment word loads and 4-way int8 SIMD dot products (xpulp.h),
 * PULP-NN's inner loop, then K mod 4 scalar p.mac steps. An input offset
 * of 128 (the zero point -128 of an int8 tensor after ReLU: x + 128 is
 * x ^ 0x80 read as uint8) flips the inputs for pv.sdotusp.b (padding
 * stored as -128 flips to 0); 0 takes pv.sdotsp.b as it is; any other
 * offset adds off * sum(w) to the bias once per block and takes the raw
 * inputs. K below 4 takes the portable path, as do targets whose YAML does
 * not list xpulpv2 in toolchain.isa.
 */
#include "pnn_common.h"

#ifdef TSR_ISA_XPULPV2
#include "rq32.h"
#include "xpulp.h"

static inline int aligned4(const void *p)
{
    return ((uintptr_t)p & 3) == 0;
}

/* Constants of channels [c, c + 4) for xp_rq; 0 when one of them needs the
 * general requantization (pnn_rq_apply). */
static inline int xp_rq_block(const tsr_requant_t *rq, int32_t c, xp_rq_t *q)
{
    return xp_rq_channel(rq, c, &q[0]) && xp_rq_channel(rq, c + 1, &q[1]) && xp_rq_channel(rq, c + 2, &q[2])
           && xp_rq_channel(rq, c + 3, &q[3]);
}

/* Store four channels of one pixel with the general requantization (or
 * the int32 accumulators): out of line, to keep the hot frame small on the
 * cluster cores' 1 kB stacks. */
static __attribute__((noinline)) void store4_general(void *out, size_t o, int32_t c, const int32_t *acc,
                                                     const tsr_requant_t *rq)
{
    pnn_rq_t p = {0};
    int i;
    for (i = 0; i < 4; i++) {
        if (rq)
            p = pnn_rq_channel(rq, c + i);
        pnn_store(out, o + c + i, acc[i], &p, rq);
    }
}

/* Requantize and store four channels of one pixel. */
static inline void store4(void *out, size_t o, int32_t c, const int32_t *acc, const xp_rq_t *q, int fast,
                          const tsr_requant_t *rq)
{
    if (fast) {
        int8_t *y = (int8_t *)out + o + c;
        y[0] = xp_rq(acc[0], &q[0]);
        y[1] = xp_rq(acc[1], &q[1]);
        y[2] = xp_rq(acc[2], &q[2]);
        y[3] = xp_rq(acc[3], &q[3]);
    } else {
        store4_general(out, o, c, acc, rq);
    }
}

/* The matmul path's helpers are out of line and compact: the cluster's
 * instruction cache is small (512 B per core, 4 kB shared on pulp-open),
 * and a convolution's hot code (im2col, this function, the stores) must
 * fit it, or every turn refills lines from L2. */

/* Requantize and store four channels of one pixel. */
static __attribute__((noinline)) void store4_small(void *out, size_t o, int32_t c, const int32_t *acc,
                                                   const xp_rq_t *q, int fast, const tsr_requant_t *rq)
{
    int i;
    if (!fast) {
        store4_general(out, o, c, acc, rq);
        return;
    }
    for (i = 0; i < 4; i++)
        ((int8_t *)out)[o + c + i] = xp_rq(acc[i], &q[i]);
}

/* sum of the K int8 weights of one row (for the offset's share) */
static __attribute__((noinline)) int32_t row_sum(const int8_t *w, int32_t K)
{
    int32_t s = 0, k;
    for (k = 0; k + 4 <= K; k += 4)
        s = xp_sdotsp(s, xp_lw(w + k), 0x01010101u);
    for (; k < K; k++)
        s += w[k];
    return s;
}

int pnn_matmul_xpulp(const int8_t *x0, const int8_t *x1, int32_t K, const int8_t *w,
                     const int32_t *bias, int32_t c0, int32_t c1, int32_t off, void *out,
                     size_t o0, size_t o1, const tsr_requant_t *rq)
{
    const int32_t n = K >> 2, tail = K & 3;
    /* 128: inputs flipped to uint8 in the loop; 0: as they are; any other
     * offset: its share off * sum(w) joins the bias, the loop takes the
     * raw inputs (im2col padding holds -off, which cancels it) */
    const int flip = off == 128;
    const uint32_t fold = flip ? 0 : (uint32_t)off;
    const int32_t toff = flip ? 128 : 0;      /* the offset the tail's MACs add */
    pnn_rq_t p = {0};
    int32_t c = c0, k;

    /* word loads at any alignment: the pulp-open cores handle misaligned
     * ones (a patch of 27 bytes puts every other row off a word) */
    if (n == 0)
        return 0;
    for (; c + 4 <= c1; c += 4) {
        const int8_t *q0 = w + (size_t)c * K, *q1 = q0 + K, *q2 = q1 + K, *q3 = q2 + K;
        const int8_t *p0 = x0, *p1 = x1;
        int32_t a00 = bias ? bias[c] : 0, a10 = bias ? bias[c + 1] : 0;
        int32_t a20 = bias ? bias[c + 2] : 0, a30 = bias ? bias[c + 3] : 0;
        int32_t a01, a11, a21, a31;
        int32_t acc[4];
        xp_rq_t q[4];
        const int fast = xp_rq_block(rq, c, q);
        if (fold) {
            a00 = (int32_t)((uint32_t)a00 + fold * (uint32_t)row_sum(q0, K));
            a10 = (int32_t)((uint32_t)a10 + fold * (uint32_t)row_sum(q1, K));
            a20 = (int32_t)((uint32_t)a20 + fold * (uint32_t)row_sum(q2, K));
            a30 = (int32_t)((uint32_t)a30 + fold * (uint32_t)row_sum(q3, K));
        }
        a01 = a00, a11 = a10, a21 = a20, a31 = a30;
        if (x1) {
            if (flip)
                XP_BLOCK_4X2(XP_SDOTUSP, XP_FLIP_SETUP, XP_FLIP2, XP_LEN_4X2_FLIP);
            else
                XP_BLOCK_4X2(XP_SDOTSP, "", "", XP_LEN_4X2);
            /* the loop left every pointer at the tail */
            for (k = 0; k < tail; k++) {
                const int32_t xa = p0[k] + toff, xb = p1[k] + toff;
                a00 = xp_mac(a00, xa, q0[k]); a01 = xp_mac(a01, xb, q0[k]);
                a10 = xp_mac(a10, xa, q1[k]); a11 = xp_mac(a11, xb, q1[k]);
                a20 = xp_mac(a20, xa, q2[k]); a21 = xp_mac(a21, xb, q2[k]);
                a30 = xp_mac(a30, xa, q3[k]); a31 = xp_mac(a31, xb, q3[k]);
            }
            acc[0] = a01; acc[1] = a11; acc[2] = a21; acc[3] = a31;
            store4_small(out, o1, c, acc, q, fast, rq);
        } else {
            (void)a01; (void)a11; (void)a21; (void)a31; (void)p1;
            if (flip)
                XP_BLOCK_4X1(XP_SDOTUSP, XP_FLIP_SETUP, XP_FLIP1, XP_LEN_4X1_FLIP);
            else
                XP_BLOCK_4X1(XP_SDOTSP, "", "", XP_LEN_4X1);
            for (k = 0; k < tail; k++) {
                const int32_t xa = p0[k] + toff;
                a00 = xp_mac(a00, xa, q0[k]); a10 = xp_mac(a10, xa, q1[k]);
                a20 = xp_mac(a20, xa, q2[k]); a30 = xp_mac(a30, xa, q3[k]);
            }
        }
        acc[0] = a00; acc[1] = a10; acc[2] = a20; acc[3] = a30;
        store4_small(out, o0, c, acc, q, fast, rq);
    }
    /* the last c1 - c mod 4 channels, one at a time */
    for (; c < c1; c++) {
        const int8_t *q = w + (size_t)c * K;
        int32_t a0 = bias ? bias[c] : 0, a1 = a0;
        for (k = 0; k < K; k++) {
            a0 = xp_mac(a0, x0[k] + off, q[k]);
            if (x1)
                a1 = xp_mac(a1, x1[k] + off, q[k]);
        }
        if (rq)
            p = pnn_rq_channel(rq, c);
        pnn_store(out, o0 + c, a0, &p, rq);
        if (x1)
            pnn_store(out, o1 + c, a1, &p, rq);
    }
    return 1;
}

/* pnn_pointwise's pixels [p, p_end) x channels [c0, c1) with the channel
 * blocks outermost: each 4-channel block's bias and requantization
 * constants are read once for all its pixel pairs (PULP-NN's per-block
 * constants), not once per pair. Returns the first channel it did not
 * compute: the c1 - c0 mod 4 last ones (pnn_matmul's one-channel loop
 * takes them), or c0 when the operands need the portable path (K not a
 * multiple of 4, unaligned tiles). */
int32_t pnn_pointwise_xpulp(const tsr_conv_args_t *a, int32_t p, int32_t p_end, int32_t c0, int32_t c1)
{
    const int32_t K = a->in_c, n = K >> 2, out_c = a->out_c;
    /* 128: inputs flipped to uint8 in the loop; any other offset (a QDQ
     * tensor's zero point: transformers' token-major linear layers) joins
     * each channel's bias once per block as off * sum(w), the loop taking
     * the raw inputs (as pnn_matmul_xpulp) */
    const int32_t off = a->input_offset == 128 ? 128 : 0, fold = a->input_offset == 128 ? 0 : a->input_offset;
    const int8_t *w = a->weights;
    const int32_t *bias = a->bias;
    const tsr_requant_t *rq = a->rq;
    int32_t c = c0, pp;

    if ((K & 3) || n == 0 || !aligned4(a->in) || !aligned4(w))
        return c0;
    for (; c + 4 <= c1; c += 4) {
        const int8_t *wc = w + (size_t)c * K;
        int32_t b0 = bias ? bias[c] : 0, b1 = bias ? bias[c + 1] : 0;
        int32_t b2 = bias ? bias[c + 2] : 0, b3 = bias ? bias[c + 3] : 0;
        if (fold) {
            b0 = (int32_t)((uint32_t)b0 + (uint32_t)fold * (uint32_t)row_sum(wc, K));
            b1 = (int32_t)((uint32_t)b1 + (uint32_t)fold * (uint32_t)row_sum(wc + K, K));
            b2 = (int32_t)((uint32_t)b2 + (uint32_t)fold * (uint32_t)row_sum(wc + 2 * K, K));
            b3 = (int32_t)((uint32_t)b3 + (uint32_t)fold * (uint32_t)row_sum(wc + 3 * K, K));
        }
        xp_rq_t q[4];
        const int fast = xp_rq_block(rq, c, q);
        int32_t acc[4];
        pp = p;
        if (fast) {
            /* the block's constants as locals (the int8 stores would make
             * GCC reload them from q for every output); the clamp and the
             * zero point are per tensor */
            const int32_t m0 = q[0].mul, m1 = q[1].mul, m2 = q[2].mul, m3 = q[3].mul;
            const int32_t r0 = q[0].round, r1 = q[1].round, r2 = q[2].round, r3 = q[3].round;
            const int32_t s0 = q[0].shift, s1 = q[1].shift, s2 = q[2].shift, s3 = q[3].shift;
            const int32_t lo = q[0].lo, hi = q[0].hi, zp = q[0].zero_point;
#define XP_RQ_ONE(acc, m, r, s) \
    ((int8_t)(xp_min(xp_max(((int32_t)(((int64_t)(acc) * (m)) >> 32) + (r)) >> (s), lo), hi) + zp))
            for (; pp + 1 < p_end; pp += 2) {
                const int8_t *p0 = a->in + (size_t)pp * K, *p1 = p0 + K;
                const int8_t *q0 = wc, *q1 = q0 + K, *q2 = q1 + K, *q3 = q2 + K;
                int32_t a00 = b0, a10 = b1, a20 = b2, a30 = b3, a01 = b0, a11 = b1, a21 = b2, a31 = b3;
                int8_t *y0 = (int8_t *)a->out + (size_t)pp * out_c + c, *y1 = y0 + out_c;
                if (off)
                    XP_BLOCK_4X2(XP_SDOTUSP, XP_FLIP_SETUP, XP_FLIP2, XP_LEN_4X2_FLIP);
                else
                    XP_BLOCK_4X2(XP_SDOTSP, "", "", XP_LEN_4X2);
                y0[0] = XP_RQ_ONE(a00, m0, r0, s0);
                y0[1] = XP_RQ_ONE(a10, m1, r1, s1);
                y0[2] = XP_RQ_ONE(a20, m2, r2, s2);
                y0[3] = XP_RQ_ONE(a30, m3, r3, s3);
                y1[0] = XP_RQ_ONE(a01, m0, r0, s0);
                y1[1] = XP_RQ_ONE(a11, m1, r1, s1);
                y1[2] = XP_RQ_ONE(a21, m2, r2, s2);
                y1[3] = XP_RQ_ONE(a31, m3, r3, s3);
            }
#undef XP_RQ_ONE
        }
        for (; pp + 1 < p_end; pp += 2) {
            const int8_t *p0 = a->in + (size_t)pp * K, *p1 = p0 + K;
            const int8_t *q0 = wc, *q1 = q0 + K, *q2 = q1 + K, *q3 = q2 + K;
            int32_t a00 = b0, a10 = b1, a20 = b2, a30 = b3, a01 = b0, a11 = b1, a21 = b2, a31 = b3;
            if (off)
                XP_BLOCK_4X2(XP_SDOTUSP, XP_FLIP_SETUP, XP_FLIP2, XP_LEN_4X2_FLIP);
            else
                XP_BLOCK_4X2(XP_SDOTSP, "", "", XP_LEN_4X2);
            acc[0] = a00; acc[1] = a10; acc[2] = a20; acc[3] = a30;
            store4(a->out, (size_t)pp * out_c, c, acc, q, fast, rq);
            acc[0] = a01; acc[1] = a11; acc[2] = a21; acc[3] = a31;
            store4(a->out, (size_t)(pp + 1) * out_c, c, acc, q, fast, rq);
        }
        if (pp < p_end) {
            const int8_t *p0 = a->in + (size_t)pp * K;
            const int8_t *q0 = wc, *q1 = q0 + K, *q2 = q1 + K, *q3 = q2 + K;
            int32_t a00 = b0, a10 = b1, a20 = b2, a30 = b3;
            if (off)
                XP_BLOCK_4X1(XP_SDOTUSP, XP_FLIP_SETUP, XP_FLIP1, XP_LEN_4X1_FLIP);
            else
                XP_BLOCK_4X1(XP_SDOTSP, "", "", XP_LEN_4X1);
            acc[0] = a00; acc[1] = a10; acc[2] = a20; acc[3] = a30;
            store4(a->out, (size_t)pp * out_c, c, acc, q, fast, rq);
        }
    }
    return c;
}

#else
/* the portable build has no Xpulp path (an empty file is not ISO C) */
typedef int pnn_no_xpulp_t;
#endif
