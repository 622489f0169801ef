/*
 * Concatenation (tsr_concat_args_t) on the Cortex-M cores. Written for
 * tessera. When every input shares the output's quantization (TFLite's
 * concatenations, most ONNX ones) each run is a copy, eight bytes a turn
 * (two words: ldr and str take any alignment on ARMv7-M), not picolibc's
 * byte loop behind memcpy; concatenations that rescale an input stay on
 * the reference kernel (tsr_concat).
 */
#include "tessera/cmsis_nn.h"
#include "tessera/kernels.h"
#include "tsr_dsp.h"

static void copy_run(int8_t *y, const int8_t *x, int32_t n)
{
    for (; n >= 8; n -= 8, x += 8, y += 8) {
        const uint32_t lo = tsr_ld32(x), hi = tsr_ld32(x + 4);
        tsr_st32(y, lo);
        tsr_st32(y + 4, hi);
    }
    for (; n > 0; n--)
        *y++ = *x++;
}

void tsr_cmsis_concat(const tsr_concat_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    const tsr_requant_t *rq = a->rq;
    /* the requantization returns its input unchanged (tsr_concat's test) */
    int copy = rq->mul[0] == 1 && rq->shift[0] == 0 && (!rq->add || rq->add[0] == 0) && !rq->per_channel &&
               rq->zero_point == 0 && rq->lo <= -128 && rq->hi >= 127 && !rq->elem.plane && rq->divisor <= 1 &&
               !rq->neg_mul;
    for (int32_t i = 0; i < a->n_in; i++)
        copy = copy && a->in_mul[i] == 1 && a->in_offset[i] == 0;
    if (!copy) {
        tsr_concat(a, 0, 1);
        return;
    }
    int8_t *y = a->out;
    for (int32_t o = 0; o < a->outer; o++)
        for (int32_t i = 0; i < a->n_in; i++) {
            copy_run(y, a->in[i] + o * a->inner[i], a->inner[i]);
            y += a->inner[i];
        }
}
