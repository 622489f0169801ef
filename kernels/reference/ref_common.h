/*
 * Helpers shared by the portable reference kernels (internal, not API).
 *
 * Everything here is static inline and stateless: cores may run the kernels
 * concurrently, and the only memory a call writes is its own share of the
 * output and its own scratch.
 */
#ifndef TESSERA_REF_COMMON_H
#define TESSERA_REF_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/kernels.h"
#include "tessera/window.h"

/* The [begin, end) share of n items that belongs to `core`: chunks of
 * ceil(n / ncores), so the tiler's "rows divisible by cores" gives every core
 * the same work and the last cores get fewer (or none) otherwise. */
static inline void tsr_ref_share(int32_t n, int core, int ncores,
                                 int32_t *begin, int32_t *end)
{
    int64_t chunk, b, e;
    if (ncores < 1)
        ncores = 1;
    chunk = ((int64_t)n + ncores - 1) / ncores;
    b = chunk * core;
    e = b + chunk;
    if (b > n) b = n;
    if (e > n) e = n;
    if (b < 0) b = 0;
    if (e < b) e = b;
    *begin = (int32_t)b;
    *end = (int32_t)e;
}

/* Output element i from accumulator acc of channel c: int8 through the
 * requantization, or the accumulator itself when there is none. */
static inline void tsr_ref_store(void *out, size_t i, int32_t acc,
                                 const tsr_requant_t *rq, int32_t c)
{
    if (rq)
        ((int8_t *)out)[i] = (int8_t)tsr_requantize(acc, rq, c);
    else
        ((int32_t *)out)[i] = acc;
}

/* The same for element (y, x, c) of the tile, whose requantization
 * parameters may vary per element. */
static inline void tsr_ref_store_at(void *out, size_t i, int32_t acc, const tsr_requant_t *rq,
                                    int32_t y, int32_t x, int32_t c)
{
    if (rq)
        ((int8_t *)out)[i] = (int8_t)tsr_requantize_at(acc, rq, y, x, c);
    else
        ((int32_t *)out)[i] = acc;
}

/* The bias of output element (y, x, c): per channel, or per element. */
static inline int32_t tsr_ref_bias(const tsr_conv_args_t *a, int32_t y, int32_t x, int32_t c)
{
    if (!a->bias)
        return 0;
    return a->bias[a->bias_elem.plane ? tsr_plane_index(&a->bias_elem, y, x, c) : c];
}

/* Whether a conv-like tile has parameters per element (then the kernels
 * take their plain per-pixel paths, which index them by row and column). */
static inline int tsr_ref_per_element(const tsr_conv_args_t *a)
{
    return a->bias_elem.plane || (a->rq && a->rq->elem.plane);
}

/*
 * The matmul at the heart of conv2d, pointwise and linear: output channels
 * [c0, c1) of one or two pixels, each pixel a row of K int8 inputs, weights
 * [out_c][K]. acc[c] = bias[c] + sum((x[k] + off) * w[c][k]).
 *
 * Register blocking 4 channels x 2 pixels: every weight loaded is used twice
 * and every (x + off) four times, 8 MACs per 6 loads. The offset is added to
 * the input inside the loop (not folded into a weight sum) so that the im2col
 * buffer can hold plain int8 and padding is simply the value -off.
 *
 * x1 may be NULL (one pixel). Output element of pixel p, channel c is
 * out[o_p + c].
 */
static inline void tsr_ref_matmul(const int8_t *x0, const int8_t *x1, int32_t K,
                                  const int8_t *w, const int32_t *bias,
                                  int32_t c0, int32_t c1, int32_t off,
                                  void *out, size_t o0, size_t o1,
                                  const tsr_requant_t *rq)
{
    int32_t c = c0, k;
    if (x1) {
        for (; c + 4 <= c1; c += 4) {
            const int8_t *w0 = w + (size_t)c * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
            int32_t b0 = bias ? bias[c] : 0, b1 = bias ? bias[c + 1] : 0;
            int32_t b2 = bias ? bias[c + 2] : 0, b3 = bias ? bias[c + 3] : 0;
            int32_t a00 = b0, a10 = b1, a20 = b2, a30 = b3;
            int32_t a01 = b0, a11 = b1, a21 = b2, a31 = b3;
            for (k = 0; k < K; k++) {
                int32_t xa = x0[k] + off, xb = x1[k] + off;
                int32_t v0 = w0[k], v1 = w1[k], v2 = w2[k], v3 = w3[k];
                a00 += xa * v0; a01 += xb * v0;
                a10 += xa * v1; a11 += xb * v1;
                a20 += xa * v2; a21 += xb * v2;
                a30 += xa * v3; a31 += xb * v3;
            }
            tsr_ref_store(out, o0 + c, a00, rq, c);
            tsr_ref_store(out, o0 + c + 1, a10, rq, c + 1);
            tsr_ref_store(out, o0 + c + 2, a20, rq, c + 2);
            tsr_ref_store(out, o0 + c + 3, a30, rq, c + 3);
            tsr_ref_store(out, o1 + c, a01, rq, c);
            tsr_ref_store(out, o1 + c + 1, a11, rq, c + 1);
            tsr_ref_store(out, o1 + c + 2, a21, rq, c + 2);
            tsr_ref_store(out, o1 + c + 3, a31, rq, c + 3);
        }
        for (; c < c1; c++) {
            const int8_t *w0 = w + (size_t)c * K;
            int32_t a0 = bias ? bias[c] : 0, a1 = a0;
            for (k = 0; k < K; k++) {
                int32_t v = w0[k];
                a0 += (x0[k] + off) * v;
                a1 += (x1[k] + off) * v;
            }
            tsr_ref_store(out, o0 + c, a0, rq, c);
            tsr_ref_store(out, o1 + c, a1, rq, c);
        }
        return;
    }
    for (; c + 4 <= c1; c += 4) {
        const int8_t *w0 = w + (size_t)c * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
        int32_t a0 = bias ? bias[c] : 0, a1 = bias ? bias[c + 1] : 0;
        int32_t a2 = bias ? bias[c + 2] : 0, a3 = bias ? bias[c + 3] : 0;
        for (k = 0; k < K; k++) {
            int32_t xa = x0[k] + off;
            a0 += xa * w0[k];
            a1 += xa * w1[k];
            a2 += xa * w2[k];
            a3 += xa * w3[k];
        }
        tsr_ref_store(out, o0 + c, a0, rq, c);
        tsr_ref_store(out, o0 + c + 1, a1, rq, c + 1);
        tsr_ref_store(out, o0 + c + 2, a2, rq, c + 2);
        tsr_ref_store(out, o0 + c + 3, a3, rq, c + 3);
    }
    for (; c < c1; c++) {
        const int8_t *w0 = w + (size_t)c * K;
        int32_t a0 = bias ? bias[c] : 0;
        for (k = 0; k < K; k++)
            a0 += (x0[k] + off) * w0[k];
        tsr_ref_store(out, o0 + c, a0, rq, c);
    }
}

#endif /* TESSERA_REF_COMMON_H */
