/* What the layer glue (glue.c) and the fused steps (fused.c) both hand to
 * CMSIS-NN: its parameter structs built from tessera's tile arguments, the
 * per-channel requantization in CMSIS-NN's form, and the depthwise filter in
 * CMSIS-NN's order. Private to the library's sources. */
#ifndef TSR_CMSIS_GLUE_H
#define TSR_CMSIS_GLUE_H

#include <stdint.h>

#include "arm_nnfunctions.h"
#include "tessera/cmsis_nn.h"

/* a failed CMSIS-NN call falls back to the reference kernel, unless the
 * strict build (tests) wants it to show */
#ifdef TSR_CMSIS_STRICT
#define FALLBACK(call) ((void)0)
#else
#define FALLBACK(call) call
/* tessera's tile arguments as the cores' (glue.c), for the entry points
 * that call the cores themselves (TFLite's and tessera's other
 * requantizations: glue.c, any_rq.c, fused.c) */
#include "tsr_mm.h"
tsr_geom_t tsr_glue_geom(const tsr_conv_args_t *a);
tsr_mm_t tsr_glue_mm(const tsr_conv_args_t *a, int32_t k);
int32_t *tsr_glue_buf(const tsr_conv_args_t *a, int32_t *bytes);
/* conv2d or pointwise (1x1, stride 1, no padding: the pointwise core) and
 * depthwise on the cores in `mode`: 0 when the scratch is too small */
int tsr_glue_conv(const tsr_conv_args_t *a, int mode);
int tsr_glue_depthwise(const tsr_conv_args_t *a, int mode);

#endif

static inline int32_t align4(int32_t n)
{
    return (n + 3) & ~3;
}

/* tessera's requantization as CMSIS-NN's multiplier and left shift per channel */
static inline void quant_fill(const tsr_requant_t *rq, int32_t *mul, int32_t *shift, int32_t channels)
{
    /* the per-channel test out of the loop (a tile's every call pays it) */
    const int32_t *m = rq->mul;
    const int8_t *s = rq->shift;
    if (rq->per_channel) {
        for (int32_t c = 0; c < channels; c++) {
            mul[c] = m[c];
            shift[c] = 31 - s[c];
        }
    } else {
        const int32_t m0 = m[0], s0 = 31 - s[0];
        for (int32_t c = 0; c < channels; c++) {
            mul[c] = m0;
            shift[c] = s0;
        }
    }
}

static inline cmsis_nn_dims dims(int32_t n, int32_t h, int32_t w, int32_t c)
{
    cmsis_nn_dims d;
    d.n = n;
    d.h = h;
    d.w = w;
    d.c = c;
    return d;
}

static inline cmsis_nn_conv_params conv_params(const tsr_conv_args_t *a)
{
    cmsis_nn_conv_params p;
    p.input_offset = a->input_offset;
    p.output_offset = a->rq->zero_point;
    p.stride.w = a->sw;
    p.stride.h = a->sh;
    p.padding.w = a->pad_l;
    p.padding.h = a->pad_t;
    p.dilation.w = 1;
    p.dilation.h = 1;
    p.activation.min = a->rq->lo;
    p.activation.max = a->rq->hi;
    return p;
}

static inline cmsis_nn_dw_conv_params dw_params(const tsr_conv_args_t *a)
{
    cmsis_nn_dw_conv_params p;
    p.input_offset = a->input_offset;
    p.output_offset = a->rq->zero_point;
    p.ch_mult = 1;
    p.stride.w = a->sw;
    p.stride.h = a->sh;
    p.padding.w = a->pad_l;
    p.padding.h = a->pad_t;
    p.dilation.w = 1;
    p.dilation.h = 1;
    p.activation.min = a->rq->lo;
    p.activation.max = a->rq->hi;
    return p;
}

/* tessera keeps depthwise filters channel-major ([c][kh][kw], so that a
 * channel tile is one DMA run); CMSIS-NN wants [kh][kw][c] */
static inline void dw_filter(int8_t *w, const int8_t *weights, int32_t taps, int32_t c)
{
    for (int32_t t = 0; t < taps; t++)
        for (int32_t ch = 0; ch < c; ch++)
            w[t * c + ch] = weights[ch * taps + t];
}

/* tessera's tile arguments as the cores' (glue.c), for the entry points
 * that call the cores themselves (TFLite's and tessera's other
 * requantizations: glue.c, any_rq.c, fused.c) */
#include "tsr_mm.h"
tsr_geom_t tsr_glue_geom(const tsr_conv_args_t *a);
tsr_mm_t tsr_glue_mm(const tsr_conv_args_t *a, int32_t k);
int32_t *tsr_glue_buf(const tsr_conv_args_t *a, int32_t *bytes);
/* conv2d or pointwise (1x1, stride 1, no padding: the pointwise core) and
 * depthwise on the cores in `mode`: 0 when the scratch is too small */
int tsr_glue_conv(const tsr_conv_args_t *a, int mode);
int tsr_glue_depthwise(const tsr_conv_args_t *a, int mode);

#endif
