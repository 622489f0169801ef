/*
 * The Xpulpv2 path of pnn_matmul (see matmul.c for the arithmetic): the K
 * loop of each 4 channel x 2 pixel block is a hardware loop of
 * post-increment word loads and 4-way int8 SIMD dot products (xpulp.h),
 * PULP-NN's inner loop. Taken when K is a multiple of 4, the rows are
 * word-aligned and the input offset is 0 (pv.sdotsp.b) or 128 (the zero
 * point -128 of an int8 tensor after ReLU: x + 128 is x ^ 0x80 read as
 * uint8, so the inputs are flipped and go through pv.sdotusp.b; padding
 * stored as -128 flips to 0). Everything else takes the portable path, as
 * do targets whose YAML does not list xpulpv2 in toolchain.isa.
 */
#include "pnn_common.h"

#ifdef TSR_ISA_XPULPV2
#include "xpulp.h"

static inline int aligned4(const void *p)
{
    return ((uintptr_t)p & 3) == 0;
}

/* Requantize and store four channels of one pixel. */
static inline void store4(void *out, size_t o, int32_t c, const int32_t *acc, const pnn_rq_t *p,
                          const tsr_requant_t *rq)
{
    pnn_store(out, o + c, acc[0], &p[0], rq);
    pnn_store(out, o + c + 1, acc[1], &p[1], rq);
    pnn_store(out, o + c + 2, acc[2], &p[2], rq);
    pnn_store(out, o + c + 3, acc[3], &p[3], rq);
}

int pnn_matmul_xpulp(const int8_t *x0, const int8_t *x1, int32_t K, const int8_t *w,
                     const int32_t *bias, int32_t c0, int32_t c1, int32_t off, void *out,
                     size_t o0, size_t o1, const tsr_requant_t *rq)
{
    const int32_t n = K >> 2;
    pnn_rq_t p[4];
    int32_t c = c0, k, i;

    if ((off != 0 && off != 128) || (K & 3) || n == 0 || !aligned4(x0) || !aligned4(w)
        || (x1 && !aligned4(x1)))
        return 0;
    for (; c + 4 <= c1; c += 4) {
        const int8_t *q0 = w + (size_t)c * K, *q1 = q0 + K, *q2 = q1 + K, *q3 = q2 + K;
        const int8_t *p0 = x0, *p1 = x1;
        int32_t a00 = bias ? bias[c] : 0, a10 = bias ? bias[c + 1] : 0;
        int32_t a20 = bias ? bias[c + 2] : 0, a30 = bias ? bias[c + 3] : 0;
        int32_t a01 = a00, a11 = a10, a21 = a20, a31 = a30;
        int32_t acc[4];
        if (rq)
            for (i = 0; i < 4; i++)
                p[i] = pnn_rq_channel(rq, c + i);
        if (x1) {
            if (off)
                XP_BLOCK_4X2(XP_SDOTUSP, XP_FLIP_SETUP, XP_FLIP2, XP_LEN_4X2_FLIP);
            else
                XP_BLOCK_4X2(XP_SDOTSP, "", "", XP_LEN_4X2);
            acc[0] = a01; acc[1] = a11; acc[2] = a21; acc[3] = a31;
            store4(out, o1, c, acc, p, rq);
        } else {
            (void)a01; (void)a11; (void)a21; (void)a31; (void)p1;
            if (off)
                XP_BLOCK_4X1(XP_SDOTUSP, XP_FLIP_SETUP, XP_FLIP1, XP_LEN_4X1_FLIP);
            else
                XP_BLOCK_4X1(XP_SDOTSP, "", "", XP_LEN_4X1);
        }
        acc[0] = a00; acc[1] = a10; acc[2] = a20; acc[3] = a30;
        store4(out, o0, c, acc, p, rq);
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
            p[0] = pnn_rq_channel(rq, c);
        pnn_store(out, o0 + c, a0, &p[0], rq);
        if (x1)
            pnn_store(out, o1 + c, a1, &p[0], rq);
    }
    return 1;
}
#else
/* the portable build has no Xpulp path (an empty file is not ISO C) */
typedef int pnn_no_xpulp_t;
#endif
