/*
 * Attention's row-wise ops on Cortex-M, CMSIS-NN style (one core): the
 * softmax (the QDQ table form; Deeploy's iSoftmax, ITAMax and ITAPartialMax
 * through the shared row function), the layer norms (QDQ's integer form,
 * Deeploy's iLayerNorm) and the lookup table (GELU, Erf). The arithmetic is
 * tessera/rowwise.h's: the reference kernels' results in 32-bit words,
 * per-row constants hoisted; here the rows' sums with the DSP extension
 * (two int8 lanes a smlad), and the table lookups a word in, a word out
 * (a table per channel too).
 */
#include "tessera/cmsis_nn.h"
#include "tessera/rowwise.h"
#include "tsr_dsp.h"

/* rows [begin, end) of `core`: chunks of ceil(n / ncores), as the reference kernels */
static void share(int32_t n, int core, int ncores, int32_t *begin, int32_t *end)
{
    const int32_t chunk = ncores > 1 ? (n + ncores - 1) / ncores : n, b = chunk * core;
    *begin = b < n ? b : n;
    *end = b + chunk < n ? b + chunk : n;
}

static int32_t row_max(const int8_t *x, int32_t n)
{
    int32_t m = -128, j;
    for (j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

static void row_sums(const int8_t *x, int32_t n, int32_t *s, int32_t *ss)
{
    int32_t a = 0, b = 0, j = 0;
    for (; j + 4 <= n; j += 4) {
        const uint32_t w = tsr_ld32(x + j);
        const int32_t even = tsr_sxtb16(w), odd = tsr_sxtb16_ror8(w);
        a = tsr_smlad(even, 0x00010001, tsr_smlad(odd, 0x00010001, a));
        b = tsr_smlad(even, even, tsr_smlad(odd, odd, b));
    }
    for (; j < n; j++) {
        a += x[j];
        b += x[j] * x[j];
    }
    *s = a, *ss = b;
}

void tsr_cmsis_softmax(const tsr_softmax_args_t *a, int core, int ncores)
{
    int32_t p0, p1;
    if (a->rounding == TSR_ROUND_TFLITE) {
        tsr_softmax(a, core, ncores);
        return;
    }
    share(a->pixels, core, ncores, &p0, &p1);
    tsr_rw_softmax_rows(a, p0, p1, row_max);
}

void tsr_cmsis_layernorm(const tsr_layernorm_args_t *a, int core, int ncores)
{
    int32_t p0, p1;
    share(a->pixels, core, ncores, &p0, &p1);
    tsr_rw_layernorm_rows(a, p0, p1, row_sums);
}

/* One table per channel (256 bytes each, [c][256]): per pixel, four
 * channels a word, their four tables 256 bytes apart. */
static void lut_channels(const tsr_lut_args_t *a, int32_t p0, int32_t p1)
{
    const int32_t c = a->c;
    for (int32_t p = p0; p < p1; p++) {
        const int8_t *x = a->in + p * c;
        int8_t *y = a->out + p * c;
        const uint8_t *t = (const uint8_t *)a->table + 128;
        int32_t j = 0;
        for (; j + 4 <= c; j += 4, t += 1024) {
            const uint32_t w = tsr_ld32(x + j);
            tsr_st32(y + j, (uint32_t)t[(int8_t)w] | (uint32_t)t[256 + (int8_t)(w >> 8)] << 8
                            | (uint32_t)t[512 + (int8_t)(w >> 16)] << 16
                            | (uint32_t)t[768 + (int8_t)(w >> 24)] << 24);
        }
        for (; j < c; j++, t += 256)
            y[j] = (int8_t)t[x[j]];
    }
}

void tsr_cmsis_lut(const tsr_lut_args_t *a, int core, int ncores)
{
    const uint8_t *t = (const uint8_t *)a->table + 128;
    int32_t p0, p1, j;
    share(a->pixels, core, ncores, &p0, &p1);
    if (a->per_channel) {
        lut_channels(a, p0, p1);
        return;
    }
    p0 *= a->c, p1 *= a->c;
    for (j = p0; j + 4 <= p1; j += 4) {
        const uint32_t w = tsr_ld32(a->in + j);
        tsr_st32(a->out + j, (uint32_t)t[(int8_t)w] | (uint32_t)t[(int8_t)(w >> 8)] << 8
                             | (uint32_t)t[(int8_t)(w >> 16)] << 16 | (uint32_t)t[(int8_t)(w >> 24)] << 24);
    }
    for (; j < p1; j++)
        a->out[j] = (int8_t)t[a->in[j]];
}
