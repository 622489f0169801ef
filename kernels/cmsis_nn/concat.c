/*
 * Concatenation (tsr_concat_args_t) on the Cortex-M cores. Written for
 * tessera. When every input shares the output's quantization (TFLite's
 * concatenations, most ONNX ones) each run is a copy, eight bytes a turn
 * (two words: ldr and str take any alignment on ARMv7-M), not picolibc's
 * byte loop behind memcpy. An input with quantization of its own (ONNX
 * Runtime's QDQ concat) is a function of its int8 value alone: its 256
 * requantized values are computed once (tsr_requantize, so exactly the
 * reference's) and its runs looked up four bytes a word, input by input;
 * an input of fewer values than the table stays on the reference's
 * per-value requantization.
 */
#include "tessera/cmsis_nn.h"
#include "tessera/kernels.h"
#include "tsr_bytes.h"
#include "tsr_dsp.h"

/* inputs rescaled to the output's parameters, one input at a time (one
 * table of 256 values on the stack) */
static void rescaled(const tsr_concat_args_t *a)
{
    int32_t total = 0, before = 0;
    for (int32_t i = 0; i < a->n_in; i++)
        total += a->inner[i];
    for (int32_t i = 0; i < a->n_in; before += a->inner[i], i++) {
        const int32_t n = a->inner[i], mul = a->in_mul[i], off = a->in_offset[i];
        const int8_t *x = a->in[i];
        int8_t *y = a->out + before;
        if ((int64_t)a->outer * n < 512) {
            for (int32_t o = 0; o < a->outer; o++, x += n, y += total)
                for (int32_t k = 0; k < n; k++)
                    y[k] = (int8_t)tsr_requantize((int64_t)(x[k] + off) * mul, a->rq, 0);
            continue;
        }
        uint8_t map[256];
        int identity = 1;
        for (int32_t v = -128; v < 128; v++) {
            const int32_t r = tsr_requantize((int64_t)(v + off) * mul, a->rq, 0);
            map[v + 128] = (uint8_t)r;
            identity = identity && r == v;
        }
        for (int32_t o = 0; o < a->outer; o++, x += n, y += total) {
            if (identity)
                tsr_copy_run(y, x, n);
            else
                tsr_map_run(y, x, n, map + 128);
        }
    }
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
        rescaled(a);
        return;
    }
    int8_t *y = a->out;
    for (int32_t o = 0; o < a->outer; o++)
        for (int32_t i = 0; i < a->n_in; i++) {
            tsr_copy_run(y, a->in[i] + o * a->inner[i], a->inner[i]);
            y += a->inner[i];
        }
}
