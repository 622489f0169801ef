/*
 * Attention's row-wise ops on the cluster, PULP-NN style: the softmax (the
 * QDQ table form; Deeploy's iSoftmax, ITAMax and ITAPartialMax through the
 * shared row function), the layer norms (QDQ's integer form, Deeploy's
 * iLayerNorm) and the lookup table (GELU, Erf). Rows go to the cores in
 * contiguous chunks (pnn_chunk). The arithmetic is tessera/rowwise.h's: the
 * reference kernels' results in 32-bit words, per-row constants hoisted;
 * here the rows' maximum and sums, four values a word on Xpulp (p.max,
 * pv.sdotsp.b), and the table read from a copy on the core's stack (the
 * generated code's table lives in L2, about 15 cycles a read).
 */
#include "pnn_common.h"
#include "tessera/rowwise.h"
#ifdef TSR_ISA_XPULPV2
#include "xpulp.h"
#endif

static int32_t row_max(const int8_t *x, int32_t n)
{
    int32_t m = -128, j;
#ifdef TSR_ISA_XPULPV2
    for (j = 0; j < n; j++)
        m = xp_max(m, x[j]);
#else
    for (j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
#endif
    return m;
}

static void row_sums(const int8_t *x, int32_t n, int32_t *s, int32_t *ss)
{
    int32_t a = 0, b = 0, j = 0;
#ifdef TSR_ISA_XPULPV2
    for (; j + 4 <= n; j += 4) {
        const uint32_t w = xp_lw(x + j);
        a = xp_sdotsp(a, w, 0x01010101u);
        b = xp_sdotsp(b, w, w);
    }
#endif
    for (; j < n; j++) {
        a += x[j];
        b += x[j] * x[j];
    }
    *s = a, *ss = b;
}

void pnn_softmax(const tsr_softmax_args_t *a, int core, int ncores)
{
    int32_t p0, p1;
    if (a->rounding == TSR_ROUND_TFLITE) {
        tsr_softmax(a, core, ncores);
        return;
    }
    pnn_chunk(a->pixels, 1, core, ncores, &p0, &p1);
    tsr_rw_softmax_rows(a, p0, p1, row_max);
}

void pnn_layernorm(const tsr_layernorm_args_t *a, int core, int ncores)
{
    int32_t p0, p1;
    pnn_chunk(a->pixels, 1, core, ncores, &p0, &p1);
    tsr_rw_layernorm_rows(a, p0, p1, row_sums);
}

/* the core's values through a table of 256 int8 (in word-sized pieces) */
static void lut_run(const int8_t *in, int8_t *out, int32_t n, const int8_t *table)
{
    int32_t j = 0;
    const uint8_t *t = (const uint8_t *)table + 128;
    for (; j + 4 <= n; j += 4) {
        const int8_t *x = in + j;
        out[j] = (int8_t)t[x[0]];
        out[j + 1] = (int8_t)t[x[1]];
        out[j + 2] = (int8_t)t[x[2]];
        out[j + 3] = (int8_t)t[x[3]];
    }
    for (; j < n; j++)
        out[j] = (int8_t)t[in[j]];
}

void pnn_lut(const tsr_lut_args_t *a, int core, int ncores)
{
    int32_t p0, p1, p;
    if (a->per_channel) {
        tsr_lut(a, core, ncores);
        return;
    }
    pnn_chunk(a->pixels, 1, core, ncores, &p0, &p1);
    p0 *= a->c, p1 *= a->c;
    if (p1 - p0 >= 256) {
        /* a copy on the stack costs 64 word reads; each value reads the table once */
        uint32_t copy[64];
#ifdef TSR_ISA_XPULPV2
        for (p = 0; p < 64; p++)
            copy[p] = xp_lw(a->table + 4 * p);
#else
        const uint8_t *src = (const uint8_t *)a->table;
        for (p = 0; p < 64; p++)
            copy[p] = (uint32_t)src[4 * p] | (uint32_t)src[4 * p + 1] << 8 | (uint32_t)src[4 * p + 2] << 16
                      | (uint32_t)src[4 * p + 3] << 24;
#endif
        lut_run(a->in + p0, a->out + p0, p1 - p0, (const int8_t *)copy);
    } else if (p1 > p0) {
        lut_run(a->in + p0, a->out + p0, p1 - p0, a->table);
    }
}
