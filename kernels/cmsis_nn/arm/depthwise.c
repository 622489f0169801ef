/*
 * Depthwise convolutions with CMSIS-NN's API: arm_depthwise_conv_3x3_s8,
 * arm_depthwise_conv_s8_opt and arm_depthwise_conv_s8. Written for tessera.
 *
 * Channels are the SIMD dimension: HWC input gives four neighbouring
 * channels in one word. One word is sign-extended (with input_offset) into
 * two int16 pairs, multiplied by the matching filter pairs with
 * smlabb/smlatt, four channels per tap. When the context buffer can hold
 * them (C * KH * KW int16, what arm_depthwise_conv_s8_opt asks for), the
 * filter is sign-extended once per call into that buffer instead of once
 * per output pixel. Windows are clipped to the input, so padded taps cost
 * nothing and contribute 0.
 */
#include "arm_nnfunctions.h"
#include "tsr_dsp.h"

typedef struct {
    const int8_t *in;
    int32_t in_h, in_w, c;
    const int8_t *w;          /* [kh][kw][c] */
    const int32_t *wx;        /* sign-extended filter, [kh*kw][c/4][2], or NULL */
    const int32_t *bias;
    const int32_t *mul, *shift;
    int32_t kh, kw, sh, sw, pt, pl;
    int32_t in_off, out_off, act_min, act_max;
    int8_t *out;
    int32_t out_h, out_w;
} tsr_dw_t;

static inline int8_t dw_finish(const tsr_dw_t *d, int32_t acc, int32_t c)
{
    tsr_rq_t r = tsr_rq_make(d->mul[c], d->shift[c]);
    return (int8_t)tsr_clamp(tsr_rq_apply(acc, r) + d->out_off, d->act_min, d->act_max);
}

/* One output pixel, every channel, taps [ky0, ky1) x [kx0, kx1). */
static void dw_pixel(const tsr_dw_t *d, int32_t oy, int32_t ox, int32_t ky0, int32_t ky1, int32_t kx0, int32_t kx1)
{
    const int32_t c = d->c, groups = c >> 2;
    const int32_t iy0 = oy * d->sh - d->pt, ix0 = ox * d->sw - d->pl;
    const int32_t off2 = tsr_dup16(d->in_off);
    int8_t *out = d->out + (oy * d->out_w + ox) * c;
    for (int32_t g = 0; g < groups; g++) {
        const int32_t ch = g * 4;
        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        if (d->bias) {
            a0 = d->bias[ch];
            a1 = d->bias[ch + 1];
            a2 = d->bias[ch + 2];
            a3 = d->bias[ch + 3];
        }
        for (int32_t ky = ky0; ky < ky1; ky++) {
            const int8_t *row = d->in + ((iy0 + ky) * d->in_w + ix0) * c + ch;
            for (int32_t kx = kx0; kx < kx1; kx++) {
                uint32_t x = tsr_ld32(row + kx * c);
                int32_t x02 = tsr_sxtab16(off2, x), x13 = tsr_sxtab16_ror8(off2, x);
                int32_t w02, w13;
                if (d->wx) {
                    const int32_t *wp = d->wx + ((ky * d->kw + kx) * groups + g) * 2;
                    w02 = wp[0];
                    w13 = wp[1];
                } else {
                    uint32_t w = tsr_ld32(d->w + (ky * d->kw + kx) * c + ch);
                    w02 = tsr_sxtb16(w);
                    w13 = tsr_sxtb16_ror8(w);
                }
                a0 = tsr_smlabb(x02, w02, a0);
                a2 = tsr_smlatt(x02, w02, a2);
                a1 = tsr_smlabb(x13, w13, a1);
                a3 = tsr_smlatt(x13, w13, a3);
            }
        }
        out[ch] = dw_finish(d, a0, ch);
        out[ch + 1] = dw_finish(d, a1, ch + 1);
        out[ch + 2] = dw_finish(d, a2, ch + 2);
        out[ch + 3] = dw_finish(d, a3, ch + 3);
    }
    for (int32_t ch = groups * 4; ch < c; ch++) {  /* channels past the last group of four */
        int32_t acc = d->bias ? d->bias[ch] : 0;
        for (int32_t ky = ky0; ky < ky1; ky++)
            for (int32_t kx = kx0; kx < kx1; kx++)
                acc += (d->in[((iy0 + ky) * d->in_w + ix0 + kx) * c + ch] + d->in_off) *
                       d->w[(ky * d->kw + kx) * c + ch];
        out[ch] = dw_finish(d, acc, ch);
    }
}

/* 3x3 windows wholly inside the input (the bulk of a MobileNet layer),
 * C a multiple of 4: filter pairs from the unpacked buffer. */
static void dw_pixel_3x3(const tsr_dw_t *d, int32_t oy, int32_t ox)
{
    const int32_t c = d->c, groups = c >> 2;
    const int32_t off2 = tsr_dup16(d->in_off);
    const int32_t row = d->in_w * c;
    const int8_t *base = d->in + ((oy * d->sh - d->pt) * d->in_w + ox * d->sw - d->pl) * c;
    int8_t *out = d->out + (oy * d->out_w + ox) * c;
    for (int32_t g = 0; g < groups; g++) {
        const int32_t ch = g * 4;
        const int8_t *p = base + ch;
        const int32_t *wp = d->wx + g * 2;
        const int32_t wstep = groups * 2;
        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        if (d->bias) {
            a0 = d->bias[ch];
            a1 = d->bias[ch + 1];
            a2 = d->bias[ch + 2];
            a3 = d->bias[ch + 3];
        }
        for (int32_t ky = 0; ky < 3; ky++, p += row) {
            for (int32_t kx = 0; kx < 3; kx++, wp += wstep) {
                uint32_t x = tsr_ld32(p + kx * c);
                int32_t x02 = tsr_sxtab16(off2, x), x13 = tsr_sxtab16_ror8(off2, x);
                a0 = tsr_smlabb(x02, wp[0], a0);
                a2 = tsr_smlatt(x02, wp[0], a2);
                a1 = tsr_smlabb(x13, wp[1], a1);
                a3 = tsr_smlatt(x13, wp[1], a3);
            }
        }
        out[ch] = dw_finish(d, a0, ch);
        out[ch + 1] = dw_finish(d, a1, ch + 1);
        out[ch + 2] = dw_finish(d, a2, ch + 2);
        out[ch + 3] = dw_finish(d, a3, ch + 3);
    }
}

static void dw_run(const tsr_dw_t *d)
{
    for (int32_t oy = 0; oy < d->out_h; oy++) {
        const int32_t iy = oy * d->sh - d->pt;
        const int32_t ky0 = iy < 0 ? -iy : 0;
        const int32_t ky1 = iy + d->kh > d->in_h ? d->in_h - iy : d->kh;
        for (int32_t ox = 0; ox < d->out_w; ox++) {
            const int32_t ix = ox * d->sw - d->pl;
            const int32_t kx0 = ix < 0 ? -ix : 0;
            const int32_t kx1 = ix + d->kw > d->in_w ? d->in_w - ix : d->kw;
            if (d->wx && d->kh == 3 && d->kw == 3 && ky0 == 0 && kx0 == 0 && ky1 == 3 && kx1 == 3 &&
                (d->c & 3) == 0)
                dw_pixel_3x3(d, oy, ox);
            else
                dw_pixel(d, oy, ox, ky0, ky1, kx0, kx1);
        }
    }
}

int32_t arm_depthwise_conv_s8_opt_get_buffer_size(const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims)
{
    return input_dims->c * filter_dims->h * filter_dims->w * (int32_t)sizeof(int16_t);
}

/* ch_mult 1, batch 1 (what every entry point below reduces to) */
static arm_cmsis_nn_status dw_ch1(const cmsis_nn_context *ctx, const cmsis_nn_dw_conv_params *p,
                                  const cmsis_nn_per_channel_quant_params *q, const cmsis_nn_dims *in_dims,
                                  const int8_t *input, const cmsis_nn_dims *f, const int8_t *filter,
                                  const int32_t *bias, const cmsis_nn_dims *out_dims, int8_t *output)
{
    tsr_dw_t d;
    const int32_t taps = f->h * f->w, groups = in_dims->c >> 2;
    d.in = input;
    d.in_h = in_dims->h;
    d.in_w = in_dims->w;
    d.c = in_dims->c;
    d.w = filter;
    d.wx = NULL;
    d.bias = bias;
    d.mul = q->multiplier;
    d.shift = q->shift;
    d.kh = f->h;
    d.kw = f->w;
    d.sh = p->stride.h;
    d.sw = p->stride.w;
    d.pt = p->padding.h;
    d.pl = p->padding.w;
    d.in_off = p->input_offset;
    d.out_off = p->output_offset;
    d.act_min = p->activation.min;
    d.act_max = p->activation.max;
    d.out = output;
    d.out_h = out_dims->h;
    d.out_w = out_dims->w;
    if (ctx && ctx->buf && ctx->size >= arm_depthwise_conv_s8_opt_get_buffer_size(in_dims, f) && groups > 0) {
        /* sign-extend the filter once: [tap][group] -> (w0, w2), (w1, w3) */
        int32_t *wx = (int32_t *)ctx->buf;
        for (int32_t t = 0; t < taps; t++)
            for (int32_t g = 0; g < groups; g++) {
                uint32_t w = tsr_ld32(filter + t * d.c + g * 4);
                wx[(t * groups + g) * 2] = tsr_sxtb16(w);
                wx[(t * groups + g) * 2 + 1] = tsr_sxtb16_ror8(w);
            }
        d.wx = wx;
    }
    for (int32_t n = 0; n < in_dims->n; n++) {
        dw_run(&d);
        d.in += in_dims->h * in_dims->w * in_dims->c;
        d.out += out_dims->h * out_dims->w * out_dims->c;
    }
    return ARM_CMSIS_NN_SUCCESS;
}

arm_cmsis_nn_status arm_depthwise_conv_3x3_s8(const cmsis_nn_context *ctx,
                                              const cmsis_nn_dw_conv_params *dw_conv_params,
                                              const cmsis_nn_per_channel_quant_params *quant_params,
                                              const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                              const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                              const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                              const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)bias_dims;
    if (input_dims->c != output_dims->c || filter_dims->h != 3 || filter_dims->w != 3 ||
        dw_conv_params->padding.w > 1 || dw_conv_params->dilation.w != 1 || dw_conv_params->dilation.h != 1)
        return ARM_CMSIS_NN_ARG_ERROR;
    return dw_ch1(ctx, dw_conv_params, quant_params, input_dims, input_data, filter_dims, filter_data, bias_data,
                  output_dims, output_data);
}

arm_cmsis_nn_status arm_depthwise_conv_s8_opt(const cmsis_nn_context *ctx,
                                              const cmsis_nn_dw_conv_params *dw_conv_params,
                                              const cmsis_nn_per_channel_quant_params *quant_params,
                                              const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                              const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                              const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                              const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)bias_dims;
    if (input_dims->c != output_dims->c || dw_conv_params->dilation.w != 1 || dw_conv_params->dilation.h != 1 ||
        ctx == NULL || ctx->buf == NULL)
        return ARM_CMSIS_NN_ARG_ERROR;
    return dw_ch1(ctx, dw_conv_params, quant_params, input_dims, input_data, filter_dims, filter_data, bias_data,
                  output_dims, output_data);
}

/* The general case, any channel multiplier: output channel c * ch_mult + m
 * reads input channel c. */
arm_cmsis_nn_status arm_depthwise_conv_s8(const cmsis_nn_context *ctx, const cmsis_nn_dw_conv_params *dw_conv_params,
                                          const cmsis_nn_per_channel_quant_params *quant_params,
                                          const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                          const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                          const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                          const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)bias_dims;
    const cmsis_nn_dw_conv_params *p = dw_conv_params;
    if (p->dilation.w != 1 || p->dilation.h != 1)
        return ARM_CMSIS_NN_ARG_ERROR;
    if (p->ch_mult == 1)
        return dw_ch1(ctx, p, quant_params, input_dims, input_data, filter_dims, filter_data, bias_data,
                      output_dims, output_data);
    const int32_t ci = input_dims->c, co = output_dims->c;
    for (int32_t n = 0; n < input_dims->n; n++) {
        const int8_t *in = input_data + n * input_dims->h * input_dims->w * ci;
        int8_t *out = output_data + n * output_dims->h * output_dims->w * co;
        for (int32_t oy = 0; oy < output_dims->h; oy++)
            for (int32_t ox = 0; ox < output_dims->w; ox++)
                for (int32_t oc = 0; oc < co; oc++) {
                    int32_t acc = bias_data ? bias_data[oc] : 0;
                    const int32_t ic = oc / p->ch_mult;
                    for (int32_t ky = 0; ky < filter_dims->h; ky++) {
                        const int32_t iy = oy * p->stride.h - p->padding.h + ky;
                        if (iy < 0 || iy >= input_dims->h)
                            continue;
                        for (int32_t kx = 0; kx < filter_dims->w; kx++) {
                            const int32_t ix = ox * p->stride.w - p->padding.w + kx;
                            if (ix < 0 || ix >= input_dims->w)
                                continue;
                            acc += (in[(iy * input_dims->w + ix) * ci + ic] + p->input_offset) *
                                   filter_data[(ky * filter_dims->w + kx) * co + oc];
                        }
                    }
                    tsr_rq_t r = tsr_rq_make(quant_params->multiplier[oc], quant_params->shift[oc]);
                    out[(oy * output_dims->w + ox) * co + oc] = (int8_t)tsr_clamp(
                        tsr_rq_apply(acc, r) + p->output_offset, p->activation.min, p->activation.max);
                }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
