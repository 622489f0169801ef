/*
 * tessera kernel API: one call computes one output tile from an input tile
 * that is already in fast memory. The generated layer code moves tiles with
 * the HAL's DMA and calls these on every core (hal_fork); each call does the
 * share of the tile that belongs to `core` of `ncores`.
 *
 * Arithmetic (the IR's, see site_scons/tessera/ir.py; the golden model
 * site_scons/tessera/golden/ops.py is the oracle):
 *   acc = bias[c] + sum((x + input_offset) * w)   over the window; padded
 *         positions contribute 0
 *   y   = clamp(((int64)acc * mul[c] + add[c] + R) >> shift[c]) + zero_point, lo, hi)
 *         R = 1 << (shift - 1) for TSR_ROUND_HALF_UP (0 when shift == 0),
 *         0 for TSR_ROUND_FLOOR; >> is arithmetic (floor).
 *   When rq is NULL the output is acc itself, as int32.
 *
 * Layouts: activations HWC (int8, or int32 accumulators); conv weights
 * [out_c][kh][kw][in_c]; pointwise and linear [out_c][in_c]; depthwise
 * [c][kh][kw] (channel-major so that a channel tile is contiguous).
 */
#ifndef TESSERA_KERNELS_H
#define TESSERA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { TSR_ROUND_HALF_UP = 0, TSR_ROUND_FLOOR = 1 };

/* Requantization of a tile: arrays are indexed by the tile's channel (the
 * generated code points them at the tile's first channel) unless
 * per_channel is 0, when element 0 serves every channel. */
typedef struct {
    const int32_t *mul;
    const int32_t *add;      /* NULL: all zero */
    const int8_t *shift;
    int32_t per_channel;
    int32_t zero_point;
    int32_t lo, hi;
    int32_t rounding;        /* TSR_ROUND_* */
} tsr_requant_t;

/* conv2d, pointwise, depthwise and linear tiles. */
typedef struct {
    const int8_t *in;            /* input tile, HWC [in_h][in_w][in_c] */
    int32_t in_h, in_w, in_c;
    const int8_t *weights;       /* see the layouts above; linear: [out_c][in_h*in_w*in_c] */
    const int32_t *bias;         /* [out_c], or NULL */
    void *out;                   /* output tile, HWC [out_h][out_w][out_c]: int8_t, or int32_t when rq is NULL */
    int32_t out_h, out_w, out_c;
    int32_t kh, kw, sh, sw;
    int32_t pad_t, pad_l, pad_b, pad_r;   /* this tile's padding */
    int32_t input_offset;
    const tsr_requant_t *rq;
    int8_t *scratch;             /* per-core scratch (im2col), scratch_bytes each, core-major */
    int32_t scratch_bytes;
} tsr_conv_args_t;

/* maxpool and avgpool tiles (channels of input and output are the same). */
typedef struct {
    const int8_t *in;
    int32_t in_h, in_w, c;
    int8_t *out;
    int32_t out_h, out_w;
    int32_t kh, kw, sh, sw;
    int32_t pad_t, pad_l, pad_b, pad_r;   /* maxpool only: padding never wins */
    int32_t input_offset;                 /* avgpool: acc = sum(x + input_offset) */
    const tsr_requant_t *rq;              /* avgpool */
} tsr_pool_args_t;

/* elementwise add of two same-shape tiles:
 *   acc = (a + in_offset[0]) * in_mul[0] + (b + in_offset[1]) * in_mul[1]   (int64) */
typedef struct {
    const int8_t *a, *b;
    void *out;                   /* int8_t, or int32_t when rq is NULL */
    int32_t n;                   /* elements */
    int32_t in_mul[2], in_offset[2];
    const tsr_requant_t *rq;     /* per-tensor (per_channel 0) */
} tsr_add_args_t;

void tsr_conv2d(const tsr_conv_args_t *a, int core, int ncores);
void tsr_pointwise(const tsr_conv_args_t *a, int core, int ncores);
void tsr_depthwise(const tsr_conv_args_t *a, int core, int ncores);
void tsr_linear(const tsr_conv_args_t *a, int core, int ncores);
void tsr_maxpool(const tsr_pool_args_t *a, int core, int ncores);
void tsr_avgpool(const tsr_pool_args_t *a, int core, int ncores);
void tsr_add(const tsr_add_args_t *a, int core, int ncores);

/* The requantization step on its own (shared by kernels of every library).
 * acc is 64-bit because an add's accumulator needs it; conv accumulators
 * are int32 and widen for free. */
static inline int32_t tsr_requantize(int64_t acc, const tsr_requant_t *rq, int32_t c)
{
    int32_t i = rq->per_channel ? c : 0;
    int32_t shift = rq->shift[i];
    int64_t v = acc * rq->mul[i] + (rq->add ? rq->add[i] : 0);
    if (rq->rounding == TSR_ROUND_HALF_UP && shift > 0)
        v += (int64_t)1 << (shift - 1);
    v = (v >> shift) + rq->zero_point;
    if (v < rq->lo) v = rq->lo;
    if (v > rq->hi) v = rq->hi;
    return (int32_t)v;
}

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_KERNELS_H */
