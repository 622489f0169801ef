/*
 * Elementwise add with tessera's semantics (CMSIS-NN's arm_elementwise_add_s8
 * rescales each input separately, with its own rounding, so it is not
 * used):
 *     acc = (a + in_offset[0]) * in_mul[0] + (b + in_offset[1]) * in_mul[1]
 * in 64 bits (smull + smlal), then the per-tensor requantization with its
 * constants worked out once per tile instead of once per element.
 *
 * TFLite's ADD (in_shift set: each input rescaled after a left shift of 20,
 * the sum rescaled, every multiply TFLite's two roundings) takes the
 * requantization cores' TFLite forms (tsr_rq.h) on doubled values: per
 * input smmlar, the sign rule and a shift, per output the same with the
 * zero point folded in.
 */
#include <stddef.h>

#include "tessera/cmsis_nn.h"
#include "tsr_rq.h"

/* One input's rescale, 2 (v + offset) << 20 given doubled (x2): TFLite's
 * MultiplyByQuantizedMultiplier for shifts 31..62 (TSR_RQ_TFLW's form
 * without a zero point). */
typedef struct {
    int32_t m, r, g, sh;
} tfl_in_t;

static int tfl_in_make(int32_t m, int32_t s, tfl_in_t *t)
{
    if (m < 0 || s < 31 || s > 62)
        return 0;
    t->m = m;
    t->sh = s - 31;
    t->r = (int32_t)((1u << t->sh) >> 1);
    t->g = t->sh ? -1 : 0;
    return 1;
}

TSR_INLINE int32_t tfl_in(int32_t x2, tfl_in_t t)
{
    return (tsr_smmlar(x2, t.m, t.r) + ((x2 >> 31) & t.g)) >> t.sh;
}

TSR_INLINE void tfl_add_body(const tsr_add_args_t *a, tfl_in_t ta, tfl_in_t tb, tsr_rqc_t r, int mode, int full)
{
    /* locals: stores through out cannot alias them */
    const int32_t oa = a->in_offset[0] * (1 << 21), ob = a->in_offset[1] * (1 << 21);
    const int32_t lo = a->rq->lo, hi = a->rq->hi, n = a->n;
    const int8_t *pa = a->a, *pb = a->b;
    int8_t *out = (int8_t *)a->out, *end = out + n;
    while (out < end) {
        const int32_t xa = *pa++ * (1 << 21) + oa, xb = *pb++ * (1 << 21) + ob;
        const int32_t sum2 = (tfl_in(xa, ta) + tfl_in(xb, tb)) * 2;
        *out++ = tsr_rq_clamp(tsr_rq_val(sum2, r, mode), lo, hi, full);
    }
}

static __attribute__((noinline)) void tfl_add_full(const tsr_add_args_t *a, tfl_in_t ta, tfl_in_t tb, tsr_rqc_t r)
{
    tfl_add_body(a, ta, tb, r, TSR_RQ_TFL, 1);
}

static __attribute__((noinline)) void tfl_add_w(const tsr_add_args_t *a, tfl_in_t ta, tfl_in_t tb, tsr_rqc_t r)
{
    tfl_add_body(a, ta, tb, r, TSR_RQ_TFLW, 0);
}

/* TFLite's ADD on int8 inputs and a per-tensor int8 output: 0 when its
 * constants fall outside the forms above (the reference kernel then). */
static int tfl_add(const tsr_add_args_t *a)
{
    tfl_in_t ta, tb;
    if (a->in_int32 || a->rq == NULL || a->rq->rounding != TSR_ROUND_TFLITE || a->rq->per_channel ||
        a->rq->elem.plane || !tfl_in_make(a->in_mul[0], a->in_shift[0], &ta) ||
        !tfl_in_make(a->in_mul[1], a->in_shift[1], &tb) || a->in_offset[0] < -255 || a->in_offset[0] > 255 ||
        a->in_offset[1] < -255 || a->in_offset[1] > 255)
        return 0;
    const tsr_rqp_t p = tsr_rqp_tessera(a->rq);
    if (tsr_rq_fast(&p, TSR_RQ_TFL, 1) && a->rq->lo == -128 && a->rq->hi == 127)
        tfl_add_full(a, ta, tb, tsr_rqc(&p, 0, TSR_RQ_TFL));
    else if (tsr_rq_fast(&p, TSR_RQ_TFLW, 1))
        tfl_add_w(a, ta, tb, tsr_rqc(&p, 0, TSR_RQ_TFLW));
    else
        return 0;
    return 1;
}

void tsr_cmsis_add(const tsr_add_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    const tsr_requant_t *rq = a->rq;
    if (a->in_shift[0]) {
        if (!tfl_add(a))
            tsr_add(a, 0, 1);
        return;
    }
    /* Requant.divisor (NEMO's 2^d - 1): the reference kernel's tsr_requantize */
    if (rq == NULL || rq->shift[0] < 0 || rq->shift[0] > 62 || rq->divisor > 1) {
        tsr_add(a, 0, 1);
        return;
    }
    const int32_t ma = a->in_mul[0], mb = a->in_mul[1], oa = a->in_offset[0], ob = a->in_offset[1];
    const int64_t mul = rq->mul[0];
    const int32_t shift = rq->shift[0];
    const int64_t bias = (rq->add ? rq->add[0] : 0) +
                         (rq->rounding == TSR_ROUND_HALF_UP && shift > 0 ? (int64_t)1 << (shift - 1) : 0);
    const int32_t zp = rq->zero_point, lo = rq->lo, hi = rq->hi;
    int8_t *out = (int8_t *)a->out;
    for (int32_t i = 0; i < a->n; i++) {
        int64_t acc = (int64_t)(a->a[i] + oa) * ma + (int64_t)(a->b[i] + ob) * mb;
        int64_t v = (mul == 1 ? acc : acc * mul) + bias;
        /* a shift of 32 or more only needs the high word */
        int32_t y = shift >= 32 ? (int32_t)(v >> 32) >> (shift - 32) : (int32_t)(v >> shift);
        if (shift < 32 && (v >> shift) != y)   /* beyond 32 bits: saturate, the clamp below decides */
            y = v < 0 ? INT32_MIN / 2 : INT32_MAX / 2;
        y += zp;
        out[i] = (int8_t)(y < lo ? lo : y > hi ? hi : y);
    }
}
