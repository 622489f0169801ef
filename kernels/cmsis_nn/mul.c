/*
 * Elementwise products (tsr_binary_args_t, the IR's mul) on the Cortex-M
 * cores. Written for tessera. Two tensors of one shape, or a tensor and a
 * [1, 1, C] vector in either order (squeeze-and-excitation's scale): the
 * product of the two offset values in 32 bits (|acc| < 2^18), then
 * tessera's per-tensor requantization in one of tsr_rq.h's fast forms (K64
 * for half up and floor, TFLX for TFLite's rounding), its constants worked
 * out once per call instead of tsr_requantize per element. Other shapes
 * and requantizations run on the reference kernel (tsr_mul).
 */
#include "tessera/cmsis_nn.h"
#include "tessera/kernels.h"
#include "tsr_rq.h"

/* out[p][k] = rq((x[p][k] + ox) * (w[p * wstep + k] + ow)): wstep c for a
 * tensor, 0 for a vector; one copy per form */
#define MUL_RUN(NAME, MODE)                                                                                 \
    static __attribute__((noinline)) void NAME(const int8_t *x, const int8_t *w, int32_t wstep, int8_t *out,  \
                                              int32_t pixels, int32_t c, int32_t ox, int32_t ow, tsr_rqc_t r, \
                                              int32_t lo, int32_t hi)                                       \
    {                                                                                                       \
        for (int32_t p = 0; p < pixels; p++, x += c, w += wstep, out += c)                                  \
            for (int32_t k = 0; k < c; k++)                                                                 \
                out[k] = (int8_t)tsr_clamp(tsr_rq_val((x[k] + ox) * (w[k] + ow), r, MODE), lo, hi);         \
    }
MUL_RUN(mul_k64, TSR_RQ_K64)
MUL_RUN(mul_tflx, TSR_RQ_TFLX)
#undef MUL_RUN

static int full(int32_t h, int32_t w, int32_t c, const tsr_binary_args_t *a)
{
    return h == a->out_h && w == a->out_w && c == a->out_c;
}

void tsr_cmsis_mul(const tsr_binary_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    const tsr_requant_t *rq = a->rq;
    const int mode = rq->rounding == TSR_ROUND_HALF_UP || rq->rounding == TSR_ROUND_FLOOR ? TSR_RQ_K64
                     : rq->rounding == TSR_ROUND_TFLITE                                    ? TSR_RQ_TFLX
                                                                                           : TSR_RQ_ANY;
    const tsr_rqp_t q = tsr_rqp_tessera(rq);
    /* x: the whole tensor; w: the other one, whole or [1, 1, C] */
    const int a_full = full(a->a_h, a->a_w, a->a_c, a), b_full = full(a->b_h, a->b_w, a->b_c, a);
    const int b_vec = a->b_h == 1 && a->b_w == 1 && a->b_c == a->out_c;
    const int a_vec = a->a_h == 1 && a->a_w == 1 && a->a_c == a->out_c;
    const int swap = !a_full && a_vec && b_full;
    if (rq->neg_mul || rq->per_channel || !tsr_rq_fast(&q, mode, 1) || !(swap || (a_full && (b_full || b_vec)))) {
        tsr_mul(a, 0, 1);
        return;
    }
    const int8_t *x = swap ? a->b : a->a, *w = swap ? a->a : a->b;
    const int32_t ox = a->in_offset[swap], ow = a->in_offset[!swap], c = a->out_c;
    const int32_t wstep = (swap ? a_full : b_full) ? c : 0;
    const tsr_rqc_t r = tsr_rqc(&q, 0, mode);
    (mode == TSR_RQ_K64 ? mul_k64 : mul_tflx)(x, w, wstep, a->out, a->out_h * a->out_w, c, ox, ow, r, rq->lo,
                                              rq->hi);
}
