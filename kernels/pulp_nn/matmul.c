/*
 * The matmul at the heart of conv2d, pointwise and linear (PULP-NN's
 * pulp_nn_matmul): output channels [c0, c1) of one or two pixels, each a
 * row of K int8 inputs, weights [out_c][K]:
 *   acc[p][c] = bias[c] + sum_k (x_p[k] + off) * w[c][k]
 *
 * Register-blocked 4 output channels x 2 pixels: each weight loaded serves
 * two pixels and each input four channels (8 MACs per 6 loads), and the
 * eight accumulators stay in registers for the whole K loop. Leftover
 * channels (c1 - c0 not a multiple of 4) take 1 x 2 blocks.
 *
 * The K loop loads each input byte once for the four channels and each
 * weight byte once for the two pixels (the SIMD path with Xpulpv2 is
 * matmul_xpulp.c): a dot product of four bytes per channel, as PULP-NN's
 * portable fallback has it, reloaded the inputs for every channel and
 * cost a third more instructions on RV32IMC.
 */
#include "pnn_common.h"
#ifdef TSR_ISA_XPULPV2
#include "xpulp.h"   /* the SIMD path, matmul_xpulp.c */
#endif

/* Keeps GCC from hoisting the loads of all four unrolled steps to the top of
 * the loop, which runs RV32 out of registers (spills cost more than the
 * unrolling saves). */
#ifdef __GNUC__
#define PNN_ORDER() __asm__ volatile("" ::: "memory")
#else
#define PNN_ORDER() ((void)0)
#endif

/* Requantization constants of channels [c, c + n) (nothing without rq). */
static inline void rq_block(const tsr_requant_t *rq, int32_t c, int n, pnn_rq_t *p)
{
    int i;
    if (rq)
        for (i = 0; i < n; i++)
            p[i] = pnn_rq_channel(rq, c + i);
}

/* not inlined into pnn_matmul: its frame and the Xpulp path's must not
 * nest on the cluster cores' 1 kB stacks */
static __attribute__((noinline)) void
matmul_portable(const int8_t *x0, const int8_t *x1, int32_t K, const int8_t *w, const int32_t *bias,
                int32_t c0, int32_t c1, int32_t off, void *out, size_t o0, size_t o1,
                const tsr_requant_t *rq)
{
    pnn_rq_t p[4];
    int32_t c = c0, k;

    if (x1) {
        for (; c + 4 <= c1; c += 4) {
            const int8_t *w0 = w + (size_t)c * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
            int32_t a00 = bias ? bias[c] : 0, a10 = bias ? bias[c + 1] : 0;
            int32_t a20 = bias ? bias[c + 2] : 0, a30 = bias ? bias[c + 3] : 0;
            int32_t a01 = a00, a11 = a10, a21 = a20, a31 = a30;
            {
                /* four k per turn: loads at fixed offsets, one pointer step */
                const int8_t *pa = x0, *pb = x1, *q0 = w0, *q1 = w1, *q2 = w2, *q3 = w3;
#define STEP_4X2(i, OFF)                                                              \
    {                                                                                 \
        int32_t xa = pa[i] OFF, xb = pb[i] OFF;                                       \
        int32_t v0 = q0[i], v1 = q1[i], v2 = q2[i], v3 = q3[i];                       \
        PNN_MAC(a00, xa, v0); PNN_MAC(a01, xb, v0); PNN_MAC(a10, xa, v1); PNN_MAC(a11, xb, v1); \
        PNN_MAC(a20, xa, v2); PNN_MAC(a21, xb, v2); PNN_MAC(a30, xa, v3); PNN_MAC(a31, xb, v3); \
    }
                /* no offset (the code generator folds a pointwise or linear
                 * layer's into its bias): no add per input byte */
                if (off == 0)
                    for (k = K >> 2; k > 0; k--) {
                        STEP_4X2(0, ) PNN_ORDER(); STEP_4X2(1, ) PNN_ORDER(); STEP_4X2(2, ) PNN_ORDER();
                        STEP_4X2(3, )
                        pa += 4; pb += 4; q0 += 4; q1 += 4; q2 += 4; q3 += 4;
                    }
                else
                    for (k = K >> 2; k > 0; k--) {
                        STEP_4X2(0, + off) PNN_ORDER(); STEP_4X2(1, + off) PNN_ORDER(); STEP_4X2(2, + off) PNN_ORDER();
                        STEP_4X2(3, + off)
                        pa += 4; pb += 4; q0 += 4; q1 += 4; q2 += 4; q3 += 4;
                    }
                for (k = K & 3; k > 0; k--) {
                    STEP_4X2(0, + off)
                    pa++; pb++; q0++; q1++; q2++; q3++;
                }
#undef STEP_4X2
            }
            rq_block(rq, c, 4, p);
            pnn_store(out, o0 + c, a00, &p[0], rq);
            pnn_store(out, o0 + c + 1, a10, &p[1], rq);
            pnn_store(out, o0 + c + 2, a20, &p[2], rq);
            pnn_store(out, o0 + c + 3, a30, &p[3], rq);
            pnn_store(out, o1 + c, a01, &p[0], rq);
            pnn_store(out, o1 + c + 1, a11, &p[1], rq);
            pnn_store(out, o1 + c + 2, a21, &p[2], rq);
            pnn_store(out, o1 + c + 3, a31, &p[3], rq);
        }
        for (; c < c1; c++) {
            const int8_t *w0 = w + (size_t)c * K;
            int32_t a0 = bias ? bias[c] : 0, a1 = a0;
            for (k = 0; k < K; k++) {
                int32_t v = w0[k];
                PNN_MAC(a0, x0[k] + off, v);
                PNN_MAC(a1, x1[k] + off, v);
            }
            rq_block(rq, c, 1, p);
            pnn_store(out, o0 + c, a0, &p[0], rq);
            pnn_store(out, o1 + c, a1, &p[0], rq);
        }
        return;
    }
    /* one pixel: 4 x 1 blocks */
    for (; c + 4 <= c1; c += 4) {
        const int8_t *w0 = w + (size_t)c * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
        int32_t a0 = bias ? bias[c] : 0, a1 = bias ? bias[c + 1] : 0;
        int32_t a2 = bias ? bias[c + 2] : 0, a3 = bias ? bias[c + 3] : 0;
        {
            const int8_t *pa = x0, *q0 = w0, *q1 = w1, *q2 = w2, *q3 = w3;
#define STEP_4X1(i)                                                                   \
    {                                                                                 \
        int32_t xa = pa[i] + off;                                                     \
        PNN_MAC(a0, xa, q0[i]); PNN_MAC(a1, xa, q1[i]); PNN_MAC(a2, xa, q2[i]); PNN_MAC(a3, xa, q3[i]); \
    }
            for (k = K >> 2; k > 0; k--) {
                STEP_4X1(0) STEP_4X1(1) STEP_4X1(2) STEP_4X1(3)
                pa += 4; q0 += 4; q1 += 4; q2 += 4; q3 += 4;
            }
            for (k = K & 3; k > 0; k--) {
                STEP_4X1(0)
                pa++; q0++; q1++; q2++; q3++;
            }
#undef STEP_4X1
        }
        rq_block(rq, c, 4, p);
        pnn_store(out, o0 + c, a0, &p[0], rq);
        pnn_store(out, o0 + c + 1, a1, &p[1], rq);
        pnn_store(out, o0 + c + 2, a2, &p[2], rq);
        pnn_store(out, o0 + c + 3, a3, &p[3], rq);
    }
    for (; c < c1; c++) {
        const int8_t *w0 = w + (size_t)c * K;
        int32_t a0 = bias ? bias[c] : 0;
        for (k = 0; k < K; k++)
            PNN_MAC(a0, x0[k] + off, w0[k]);
        rq_block(rq, c, 1, p);
        pnn_store(out, o0 + c, a0, &p[0], rq);
    }
}

void pnn_matmul(const int8_t *x0, const int8_t *x1, int32_t K, const int8_t *w,
                const int32_t *bias, int32_t c0, int32_t c1, int32_t off, void *out,
                size_t o0, size_t o1, const tsr_requant_t *rq)
{
#ifdef TSR_ISA_XPULPV2
    if (pnn_matmul_xpulp(x0, x1, K, w, bias, c0, c1, off, out, o0, o1, rq))
        return;
#endif
    matmul_portable(x0, x1, K, w, bias, c0, c1, off, out, o0, o1, rq);
}
