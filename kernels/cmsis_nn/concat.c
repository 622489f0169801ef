/*
 * Concatenation (tsr_concat_args_t) on the Cortex-M cores. Written for
 * tessera. When every input shares the output's quantization (TFLite's
 * concatenations, most ONNX ones) each run is a copy, eight bytes a turn
 * (two words: ldr and str take any alignment on ARMv7-M), not picolibc's
 * byte loop behind memcpy. An input that is rescaled (per tensor) goes
 * through a table of its 256 values' results when it has enough elements
 * to pay for the table (tsr_requantize's own results: bit-exact by
 * construction), four bytes a word; a few elements go one at a time.
 * Element-wise requantization planes stay on the reference kernel.
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

/* n bytes through table t (indexed from -128), four a word */
static void table_run(int8_t *y, const int8_t *x, int32_t n, const int8_t *t)
{
    for (; n >= 4; n -= 4, x += 4, y += 4) {
        const uint32_t w = tsr_ld32(x);
        tsr_st32(y, (uint32_t)(uint8_t)t[(int8_t)w] | (uint32_t)(uint8_t)t[(int8_t)(w >> 8)] << 8 |
                        (uint32_t)(uint8_t)t[(int8_t)(w >> 16)] << 16 | (uint32_t)(uint8_t)t[(int8_t)(w >> 24)] << 24);
    }
    for (; n > 0; n--)
        *y++ = t[*x++];
}

/* below this many elements an input's table costs more than it saves */
#define TABLE_MIN 512

static void rescaled(const tsr_concat_args_t *a)
{
    const tsr_requant_t *rq = a->rq;
    if (rq->elem.plane) {
        tsr_concat(a, 0, 1);
        return;
    }
    int8_t table[256];
    int32_t total = 0, at = 0;
    for (int32_t i = 0; i < a->n_in; i++)
        total += a->inner[i];
    for (int32_t i = 0; i < a->n_in; at += a->inner[i], i++) {
        const int32_t inner = a->inner[i], mul = a->in_mul[i], off = a->in_offset[i];
        const int8_t *x = a->in[i];
        int8_t *y = a->out + at;
        if (inner * a->outer >= TABLE_MIN) {
            for (int32_t v = -128; v < 128; v++)
                table[v + 128] = (int8_t)tsr_requantize((int64_t)(v + off) * mul, rq, 0);
            for (int32_t o = 0; o < a->outer; o++, x += inner, y += total)
                table_run(y, x, inner, table + 128);
            continue;
        }
        for (int32_t o = 0; o < a->outer; o++, x += inner, y += total)
            for (int32_t k = 0; k < inner; k++)
                y[k] = (int8_t)tsr_requantize((int64_t)(x[k] + off) * mul, rq, 0);
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
            copy_run(y, a->in[i] + o * a->inner[i], a->inner[i]);
            y += a->inner[i];
        }
}
