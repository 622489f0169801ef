/*
 * The transpose (tsr_transpose_args_t) for the optimized libraries
 * (kernels/pulp_nn/movement.c, kernels/cmsis_nn/movement.c): the reference
 * kernel's results and core share (a contiguous share of the output's
 * rows), moved a word at a time. The includer defines TSR_TP_LD32 and
 * TSR_TP_ST32, a word load and store at any alignment (both libraries'
 * cores have them: pulp-open's handle misaligned words, ARMv7-M's ldr/str).
 *   - the innermost axis stays innermost (head split/merge, [T,H,D] ->
 *     [H,T,D]): each output row is a run of the input, copied in words;
 *   - the innermost axis moves and consecutive output rows read consecutive
 *     input bytes ([1,T,K] -> [1,K,T], [H,T,D] -> [H,D,T]): 4x4 byte blocks,
 *     four word loads, the block transposed in registers, four word stores;
 *     the rows and columns past the blocks a byte at a time;
 *   - any other perm (the rows' input step not 1): the reference loop.
 */
#ifndef TESSERA_TRANSPOSE_H
#define TESSERA_TRANSPOSE_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/kernels.h"

/* n bytes from x to o, words first */
static inline void tsr_tp_run(int8_t *o, const int8_t *x, int32_t n)
{
    int32_t k = 0;
    for (; k + 8 <= n; k += 8) {
        const uint32_t w0 = TSR_TP_LD32(x + k), w1 = TSR_TP_LD32(x + k + 4);
        TSR_TP_ST32(o + k, w0);
        TSR_TP_ST32(o + k + 4, w1);
    }
    for (; k + 4 <= n; k += 4)
        TSR_TP_ST32(o + k, TSR_TP_LD32(x + k));
    for (; k < n; k++)
        o[k] = x[k];
}

/* o[i * os + k] = x[i + k * xs] for i < nr, k < nc */
static inline void tsr_tp_block(int8_t *o, int32_t os, const int8_t *x, int32_t xs, int32_t nr, int32_t nc)
{
    int32_t i = 0, k;
    for (; i + 4 <= nr; i += 4, o += 4 * (size_t)os, x += 4) {
        const int8_t *p = x;
        for (k = 0; k + 4 <= nc; k += 4, p += 4 * (size_t)xs) {
            /* w_j: column k + j's bytes of rows i .. i + 3 (little-endian lanes) */
            const uint32_t w0 = TSR_TP_LD32(p), w1 = TSR_TP_LD32(p + xs);
            const uint32_t w2 = TSR_TP_LD32(p + 2 * (size_t)xs), w3 = TSR_TP_LD32(p + 3 * (size_t)xs);
            /* bytes interleaved in pairs, then halfwords */
            const uint32_t t0 = (w0 & 0x00FF00FFu) | ((w1 << 8) & 0xFF00FF00u);
            const uint32_t t1 = ((w0 >> 8) & 0x00FF00FFu) | (w1 & 0xFF00FF00u);
            const uint32_t t2 = (w2 & 0x00FF00FFu) | ((w3 << 8) & 0xFF00FF00u);
            const uint32_t t3 = ((w2 >> 8) & 0x00FF00FFu) | (w3 & 0xFF00FF00u);
            TSR_TP_ST32(o + k, (t0 & 0xFFFFu) | (t2 << 16));
            TSR_TP_ST32(o + os + k, (t1 & 0xFFFFu) | (t3 << 16));
            TSR_TP_ST32(o + 2 * (size_t)os + k, (t0 >> 16) | (t2 & 0xFFFF0000u));
            TSR_TP_ST32(o + 3 * (size_t)os + k, (t1 >> 16) | (t3 & 0xFFFF0000u));
        }
        for (; k < nc; k++, p += xs) {
            o[k] = p[0];
            o[os + k] = p[1];
            o[2 * (size_t)os + k] = p[2];
            o[3 * (size_t)os + k] = p[3];
        }
    }
    for (; i < nr; i++, o += os, x++) {
        const int8_t *p = x;
        for (k = 0; k < nc; k++, p += xs)
            o[k] = *p;
    }
}

/* core's [r0, r1) of the output's rows (axes 0 and 1 together): chunks of
 * ceil(rows / ncores), the reference kernel's share */
static inline void tsr_tp_share(const tsr_transpose_args_t *a, int core, int ncores, int32_t *r0, int32_t *r1)
{
    const int32_t dims[3] = {a->in_h, a->in_w, a->in_c};
    const int64_t n = (int64_t)dims[a->perm[0]] * dims[a->perm[1]];
    const int64_t chunk = ncores > 1 ? (n + ncores - 1) / ncores : n, b = chunk * core;
    *r0 = (int32_t)(b < n ? b : n);
    *r1 = (int32_t)(b + chunk < n ? b + chunk : n);
}

/* output rows [r0, r1) of the transpose */
static inline void tsr_tp_rows(const tsr_transpose_args_t *a, int32_t r0, int32_t r1)
{
    const int32_t dims[3] = {a->in_h, a->in_w, a->in_c};
    const size_t stride[3] = {(size_t)a->in_w * (size_t)a->in_c, (size_t)a->in_c, 1};
    const int32_t d1 = dims[a->perm[1]], d2 = dims[a->perm[2]];
    const size_t s0 = stride[a->perm[0]], s1 = stride[a->perm[1]], s2 = stride[a->perm[2]];
    /* the input step from one output row to the next (within axis 1's rows) */
    const size_t step = d1 == 1 ? s0 : s1;
    int32_t r = r0, i0, i1, k;
    if (r0 >= r1)
        return;
    i0 = r0 / d1, i1 = r0 % d1;
    while (r < r1) {
        int8_t *o = a->out + (size_t)r * (size_t)d2;
        const int8_t *x = a->in + (size_t)i0 * s0 + (size_t)i1 * s1;
        if (s2 == 1) {
            tsr_tp_run(o, x, d2);
            r++, i1++;
        } else if (step == 1) {
            /* the rows left in this run of axis 1 (all of the share when it is 1) */
            const int32_t n = d1 == 1 ? r1 - r : (d1 - i1 < r1 - r ? d1 - i1 : r1 - r);
            tsr_tp_block(o, d2, x, (int32_t)s2, n, d2);
            r += n;
            if (d1 == 1)
                i0 += n;
            else
                i1 += n;
        } else {
            for (k = 0; k < d2; k++, x += s2)
                o[k] = *x;
            r++, i1++;
        }
        if (i1 == d1)
            i1 = 0, i0++;
    }
}

#endif
