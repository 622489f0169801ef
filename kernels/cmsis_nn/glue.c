/*
 * tessera's tile calls (tessera/cmsis_nn.h) as CMSIS-NN calls: the tile's
 * geometry becomes cmsis_nn_dims and parameter structs, its requantization
 * CMSIS-NN's per-channel multiplier/shift arrays (shift = 31 - tessera's
 * right shift), the tile's top/left padding CMSIS-NN's padding (the bottom
 * and right padding follow from the output size, as in CMSIS-NN).
 *
 * Only core 0 computes: Cortex-M targets have one core.
 *
 * TSR_CMSIS_STRICT (tests only) leaves a refused tile uncomputed instead of
 * falling back, so that a test sees every call the CMSIS-NN path refuses.
 */
#include <stddef.h>

#include "arm_nnfunctions.h"
#include "tessera/cmsis_nn.h"
#include "tsr_glue.h"
#include "tsr_mm.h"


typedef struct {
    cmsis_nn_per_channel_quant_params q;
    cmsis_nn_context ctx;     /* the scratch left after what the glue itself keeps */
} quant_t;

/* CMSIS-NN's view of the tile's requantization, in the front of the scratch. */
static quant_t quant(const tsr_requant_t *rq, int8_t *scratch, int32_t scratch_bytes, int32_t channels)
{
    quant_t s;
    int32_t *mul = (int32_t *)(void *)scratch, *shift = mul + channels;
    quant_fill(rq, mul, shift, channels);
    s.q.multiplier = mul;
    s.q.shift = shift;
    s.ctx.buf = shift + channels;
    s.ctx.size = scratch_bytes - 8 * channels;
    return s;
}

void tsr_cmsis_conv2d(const tsr_conv_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    quant_t s = quant(a->rq, a->scratch, a->scratch_bytes, a->out_c);
    cmsis_nn_conv_params p = conv_params(a);
    cmsis_nn_dims in = dims(1, a->in_h, a->in_w, a->in_c), f = dims(a->out_c, a->kh, a->kw, a->in_c);
    cmsis_nn_dims b = dims(1, 1, 1, a->out_c), out = dims(1, a->out_h, a->out_w, a->out_c);
    if (arm_convolve_s8(&s.ctx, &p, &s.q, &in, a->in, &f, a->weights, &b, a->bias, NULL, &out, a->out) !=
        ARM_CMSIS_NN_SUCCESS)
        FALLBACK(tsr_conv2d(a, 0, 1));
}

void tsr_cmsis_pointwise(const tsr_conv_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    quant_t s = quant(a->rq, a->scratch, a->scratch_bytes, a->out_c);
    cmsis_nn_conv_params p = conv_params(a);
    cmsis_nn_dims in = dims(1, a->in_h, a->in_w, a->in_c), f = dims(a->out_c, 1, 1, a->in_c);
    cmsis_nn_dims b = dims(1, 1, 1, a->out_c), out = dims(1, a->out_h, a->out_w, a->out_c);
    if (arm_convolve_1x1_s8_fast(&s.ctx, &p, &s.q, &in, a->in, &f, a->weights, &b, a->bias, &out, a->out) !=
        ARM_CMSIS_NN_SUCCESS)
        FALLBACK(tsr_pointwise(a, 0, 1));
}

void tsr_cmsis_depthwise(const tsr_conv_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    const int32_t c = a->out_c, taps = a->kh * a->kw;
    quant_t s = quant(a->rq, a->scratch, a->scratch_bytes, c);
    int8_t *w = (int8_t *)s.ctx.buf;
    dw_filter(w, a->weights, taps, c);
    cmsis_nn_context ctx;
    ctx.buf = w + align4(taps * c);
    ctx.size = s.ctx.size - align4(taps * c);
    cmsis_nn_dw_conv_params p = dw_params(a);
    cmsis_nn_dims in = dims(1, a->in_h, a->in_w, a->in_c), f = dims(1, a->kh, a->kw, c);
    cmsis_nn_dims b = dims(1, 1, 1, c), out = dims(1, a->out_h, a->out_w, c);
    arm_cmsis_nn_status st;
    /* CMSIS-NN's 3x3 kernel checks only the left padding but handles at
     * most one padded row or column on every side (ARM's does; tessera's
     * would take more) */
    if (a->kh == 3 && a->kw == 3 && a->pad_t <= 1 && a->pad_l <= 1 && a->pad_b <= 1 && a->pad_r <= 1)
        st = arm_depthwise_conv_3x3_s8(&ctx, &p, &s.q, &in, a->in, &f, w, &b, a->bias, &out, a->out);
    else if (ctx.size >= arm_depthwise_conv_s8_opt_get_buffer_size(&in, &f))
        st = arm_depthwise_conv_s8_opt(&ctx, &p, &s.q, &in, a->in, &f, w, &b, a->bias, &out, a->out);
    else
        st = arm_depthwise_conv_s8(&ctx, &p, &s.q, &in, a->in, &f, w, &b, a->bias, &out, a->out);
    if (st != ARM_CMSIS_NN_SUCCESS)
        FALLBACK(tsr_depthwise(a, 0, 1));
}

void tsr_cmsis_linear(const tsr_conv_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    const int32_t k = a->in_h * a->in_w * a->in_c;
    cmsis_nn_fc_params p;
    p.input_offset = a->input_offset;
    p.filter_offset = 0;
    p.output_offset = a->rq->zero_point;
    p.activation.min = a->rq->lo;
    p.activation.max = a->rq->hi;
    cmsis_nn_dims in = dims(1, a->in_h, a->in_w, a->in_c), f = dims(k, 1, 1, a->out_c);
    cmsis_nn_dims b = dims(1, 1, 1, a->out_c), out = dims(1, 1, 1, a->out_c);
    arm_cmsis_nn_status st;
    if (a->rq->per_channel) {
        quant_t s = quant(a->rq, a->scratch, a->scratch_bytes, a->out_c);
        st = arm_fully_connected_per_channel_s8(&s.ctx, &p, &s.q, &in, a->in, &f, a->weights, &b, a->bias, &out,
                                                (int8_t *)a->out);
    } else {
        cmsis_nn_per_tensor_quant_params q;
        cmsis_nn_context ctx;
        q.multiplier = a->rq->mul[0];
        q.shift = 31 - a->rq->shift[0];
        ctx.buf = a->scratch;
        ctx.size = a->scratch_bytes;
        st = arm_fully_connected_s8(&ctx, &p, &q, &in, a->in, &f, a->weights, &b, a->bias, &out,
                                    (int8_t *)a->out);
    }
    if (st != ARM_CMSIS_NN_SUCCESS)
        FALLBACK(tsr_linear(a, 0, 1));
}

void tsr_cmsis_maxpool(const tsr_pool_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    cmsis_nn_context ctx = {0, 0};
    cmsis_nn_pool_params p;
    p.stride.w = a->sw;
    p.stride.h = a->sh;
    p.padding.w = a->pad_l;
    p.padding.h = a->pad_t;
    p.activation.min = -128;
    p.activation.max = 127;
    cmsis_nn_dims in = dims(1, a->in_h, a->in_w, a->c), f = dims(1, a->kh, a->kw, 1);
    cmsis_nn_dims out = dims(1, a->out_h, a->out_w, a->c);
    if (arm_max_pool_s8(&ctx, &p, &in, a->in, &f, &out, a->out) != ARM_CMSIS_NN_SUCCESS)
        FALLBACK(tsr_maxpool(a, 0, 1));
}

/* ---- tessera's entry points for TFLite's rounding (TSR_RQ_TFL) --------------
 * The same cores as the CMSIS-NN calls above, with the requantization read
 * from tessera's arrays; the scratch as the CMSIS-NN glue lays it out (its
 * 8 bytes a channel first, then the kernel's buffer), so that every layer
 * of a kind takes the same loop order (the in-place planning's model). */

tsr_geom_t tsr_glue_geom(const tsr_conv_args_t *a)
{
    tsr_geom_t g;
    g.in = a->in;
    g.in_h = a->in_h;
    g.in_w = a->in_w;
    g.in_c = a->in_c;
    g.kh = a->kh;
    g.kw = a->kw;
    g.sh = a->sh;
    g.sw = a->sw;
    g.pt = a->pad_t;
    g.pl = a->pad_l;
    g.in_off = a->input_offset;
    g.out = (int8_t *)a->out;
    g.out_h = a->out_h;
    g.out_w = a->out_w;
    return g;
}

tsr_mm_t tsr_glue_mm(const tsr_conv_args_t *a, int32_t k)
{
    tsr_mm_t m;
    m.w = a->weights;
    m.bias = a->bias;
    m.k = k;
    m.co = a->out_c;
    m.q = tsr_rqp_tessera(a->rq);
    m.dbl = 0;
    return m;
}

/* the kernel's buffer after the glue's per-channel arrays, or NULL */
int32_t *tsr_glue_buf(const tsr_conv_args_t *a, int32_t *bytes)
{
    const int32_t skip = 8 * a->out_c;
    *bytes = a->scratch ? a->scratch_bytes - skip : 0;
    return a->scratch && *bytes > 0 ? (int32_t *)(void *)(a->scratch + skip) : NULL;
}

int tsr_glue_conv(const tsr_conv_args_t *a, int mode)
{
    int32_t bytes;
    int32_t *buf = tsr_glue_buf(a, &bytes);
    const tsr_mm_t m = tsr_glue_mm(a, a->kh * a->kw * a->in_c);
    const tsr_geom_t g = tsr_glue_geom(a);
    if (a->kh == 1 && a->kw == 1 && a->sh == 1 && a->sw == 1 && !(a->pad_t | a->pad_l | a->pad_b | a->pad_r))
        return tsr_mm_pointwise(&m, a->in, a->in_h * a->in_w, a->input_offset, (int8_t *)a->out, buf, bytes, mode);
    return tsr_mm_conv(&m, &g, buf, bytes, mode);
}

int tsr_glue_depthwise(const tsr_conv_args_t *a, int mode)
{
    const int32_t c = a->out_c, taps = a->kh * a->kw;
    if (a->in_c != c || a->scratch == NULL || a->scratch_bytes < 8 * c + align4(taps * c))
        return 0;
    tsr_dwk_t d;
    int8_t *w = a->scratch + 8 * c;
    const int32_t room = a->scratch_bytes - 8 * c - align4(taps * c);
    dw_filter(w, a->weights, taps, c);
    d.g = tsr_glue_geom(a);
    d.c = c;
    d.w = w;
    d.wx = room >= 2 * taps * c ? (int32_t *)(void *)(w + align4(taps * c)) : NULL;
    d.room = room;
    d.bias = a->bias;
    d.q = tsr_rqp_tessera(a->rq);
    tsr_dw(&d, mode);
    return 1;
}

void tsr_cmsis_conv2d_tfl(const tsr_conv_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core == 0 && !tsr_glue_conv(a, TSR_RQ_TFL))
        FALLBACK(tsr_conv2d(a, 0, 1));
}

void tsr_cmsis_pointwise_tfl(const tsr_conv_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core == 0 && !tsr_glue_conv(a, TSR_RQ_TFL))
        FALLBACK(tsr_pointwise(a, 0, 1));
}

void tsr_cmsis_depthwise_tfl(const tsr_conv_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core == 0 && !tsr_glue_depthwise(a, TSR_RQ_TFL))
        FALLBACK(tsr_depthwise(a, 0, 1));
}

void tsr_cmsis_linear_tfl(const tsr_conv_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core == 0) {
        int32_t bytes;
        int32_t *buf = tsr_glue_buf(a, &bytes);
        const tsr_mm_t m = tsr_glue_mm(a, a->in_h * a->in_w * a->in_c);
        tsr_mm_fc(&m, a->in, a->input_offset, (int8_t *)a->out, buf, bytes, TSR_RQ_TFLX);
    }
}
