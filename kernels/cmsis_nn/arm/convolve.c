/*
 * Convolutions with CMSIS-NN's API: arm_convolve_s8 (any kernel, im2col)
 * and arm_convolve_1x1_s8_fast (pointwise). Written for tessera.
 *
 * Both turn two output pixels at a time into int16 columns (input plus
 * input_offset, zero where the window hangs over the padding) and multiply
 * them with the int8 filter rows two output channels at a time: every
 * filter word is loaded and sign-extended once for two pixels, every column
 * word loaded once for two channels, and each smlad does two MACs. Columns
 * are "reordered" (see tsr_dsp.h) and interleaved by groups of four
 * elements, pixel 0 then pixel 1, so one pointer walks both.
 */
#include "arm_nnfunctions.h"
#include "tsr_dsp.h"

typedef struct {
    const int8_t *w;          /* filter rows [co][k] */
    const int32_t *bias;      /* [co] or NULL */
    const int32_t *mul;
    const int32_t *shift;
    int32_t k, co;
    int32_t out_offset, act_min, act_max;
} tsr_mm_t;

/* int16 position of element k of pixel 0 in an interleaved column */
static inline int32_t col_index(int32_t k)
{
    static const uint8_t lane[4] = {0, 2, 1, 3};
    return (k >> 2) * 8 + lane[k & 3];
}

static inline void st16(int32_t *col, int32_t index, int32_t v)
{
    int16_t h = (int16_t)v;
    memcpy((int16_t *)col + index, &h, 2);
}

static inline int32_t ld16(const int32_t *col, int32_t index)
{
    int16_t h;
    memcpy(&h, (const int16_t *)col + index, 2);
    return h;
}

/* Elements [k, k + n) of the column at col (pixel 0's slots of that column
 * pair): n values of src plus offset, or zeros when src is NULL. */
static void col_put(int32_t *col, int32_t k, const int8_t *src, int32_t n, int32_t offset)
{
    if ((k & 3) == 0) {
        const int32_t off2 = tsr_dup16(offset);
        int32_t *dst = col + (k >> 2) * 4;
        if (src) {
            for (; n >= 4; n -= 4, k += 4, src += 4, dst += 4) {
                uint32_t x = tsr_ld32(src);
                dst[0] = tsr_sxtab16(off2, x);
                dst[1] = tsr_sxtab16_ror8(off2, x);
            }
        } else {
            for (; n >= 4; n -= 4, k += 4, dst += 4)
                dst[0] = dst[1] = 0;
        }
    }
    for (; n > 0; n--, k++)
        st16(col, col_index(k), src ? *src++ + offset : 0);
}

static inline int8_t finish(int32_t acc, const tsr_mm_t *m, int32_t c)
{
    tsr_rq_t r = tsr_rq_make(m->mul[c], m->shift[c]);
    return (int8_t)tsr_clamp(tsr_rq_apply(acc, r) + m->out_offset, m->act_min, m->act_max);
}

/* All output channels of two pixels (columns col, interleaved) into out0
 * and out1. */
static void mm_2px(const tsr_mm_t *m, const int32_t *cols, int8_t *out0, int8_t *out1)
{
    const int32_t k = m->k, groups = k >> 2, tail = k & 3;
    int32_t c = 0;
    for (; c + 1 < m->co; c += 2) {
        const int8_t *pa = m->w + c * k, *pb = pa + k;
        const int32_t *col = cols;
        int32_t b0 = m->bias ? m->bias[c] : 0, b1 = m->bias ? m->bias[c + 1] : 0;
        int32_t a00 = b0, a01 = b0, a10 = b1, a11 = b1;
        for (int32_t g = groups; g > 0; g--) {
            uint32_t wa = tsr_ld32(pa), wb = tsr_ld32(pb);
            int32_t x0 = col[0], x1 = col[1], y0 = col[2], y1 = col[3];
            int32_t w02 = tsr_sxtb16(wa), w13 = tsr_sxtb16_ror8(wa);
            pa += 4;
            pb += 4;
            col += 4;
            a00 = tsr_smlad(w02, x0, a00);
            a00 = tsr_smlad(w13, x1, a00);
            a01 = tsr_smlad(w02, y0, a01);
            a01 = tsr_smlad(w13, y1, a01);
            w02 = tsr_sxtb16(wb);
            w13 = tsr_sxtb16_ror8(wb);
            a10 = tsr_smlad(w02, x0, a10);
            a10 = tsr_smlad(w13, x1, a10);
            a11 = tsr_smlad(w02, y0, a11);
            a11 = tsr_smlad(w13, y1, a11);
        }
        for (int32_t j = 0; j < tail; j++) {
            int32_t i = col_index(groups * 4 + j);
            int32_t x = ld16(cols, i), y = ld16(cols, i + 4);
            a00 += pa[j] * x;
            a01 += pa[j] * y;
            a10 += pb[j] * x;
            a11 += pb[j] * y;
        }
        out0[c] = finish(a00, m, c);
        out1[c] = finish(a01, m, c);
        out0[c + 1] = finish(a10, m, c + 1);
        out1[c + 1] = finish(a11, m, c + 1);
    }
    if (c < m->co) {  /* an odd last channel */
        const int8_t *pa = m->w + c * k;
        const int32_t *col = cols;
        int32_t a00 = m->bias ? m->bias[c] : 0, a01 = a00;
        for (int32_t g = groups; g > 0; g--) {
            uint32_t wa = tsr_ld32(pa);
            int32_t w02 = tsr_sxtb16(wa), w13 = tsr_sxtb16_ror8(wa);
            a00 = tsr_smlad(w02, col[0], a00);
            a00 = tsr_smlad(w13, col[1], a00);
            a01 = tsr_smlad(w02, col[2], a01);
            a01 = tsr_smlad(w13, col[3], a01);
            pa += 4;
            col += 4;
        }
        for (int32_t j = 0; j < tail; j++) {
            int32_t i = col_index(groups * 4 + j);
            a00 += pa[j] * ld16(cols, i);
            a01 += pa[j] * ld16(cols, i + 4);
        }
        out0[c] = finish(a00, m, c);
        out1[c] = finish(a01, m, c);
    }
}

/* All output channels of one pixel (pixel 0's slots of cols). */
static void mm_1px(const tsr_mm_t *m, const int32_t *cols, int8_t *out)
{
    const int32_t k = m->k, groups = k >> 2, tail = k & 3;
    int32_t c = 0;
    for (; c + 1 < m->co; c += 2) {
        const int8_t *pa = m->w + c * k, *pb = pa + k;
        const int32_t *col = cols;
        int32_t a0 = m->bias ? m->bias[c] : 0, a1 = m->bias ? m->bias[c + 1] : 0;
        for (int32_t g = groups; g > 0; g--) {
            uint32_t wa = tsr_ld32(pa), wb = tsr_ld32(pb);
            int32_t x0 = col[0], x1 = col[1];
            a0 = tsr_smlad(tsr_sxtb16(wa), x0, a0);
            a0 = tsr_smlad(tsr_sxtb16_ror8(wa), x1, a0);
            a1 = tsr_smlad(tsr_sxtb16(wb), x0, a1);
            a1 = tsr_smlad(tsr_sxtb16_ror8(wb), x1, a1);
            pa += 4;
            pb += 4;
            col += 4;
        }
        for (int32_t j = 0; j < tail; j++) {
            int32_t x = ld16(cols, col_index(groups * 4 + j));
            a0 += pa[j] * x;
            a1 += pb[j] * x;
        }
        out[c] = finish(a0, m, c);
        out[c + 1] = finish(a1, m, c + 1);
    }
    if (c < m->co) {
        const int8_t *pa = m->w + c * k;
        const int32_t *col = cols;
        int32_t a0 = m->bias ? m->bias[c] : 0;
        for (int32_t g = groups; g > 0; g--) {
            uint32_t wa = tsr_ld32(pa);
            a0 = tsr_smlad(tsr_sxtb16(wa), col[0], a0);
            a0 = tsr_smlad(tsr_sxtb16_ror8(wa), col[1], a0);
            pa += 4;
            col += 4;
        }
        for (int32_t j = 0; j < tail; j++)
            a0 += pa[j] * ld16(cols, col_index(groups * 4 + j));
        out[c] = finish(a0, m, c);
    }
}

static tsr_mm_t mm_params(const cmsis_nn_conv_params *p, const cmsis_nn_per_channel_quant_params *q,
                          const int8_t *w, const int32_t *bias, int32_t k, int32_t co)
{
    tsr_mm_t m;
    m.w = w;
    m.bias = bias;
    m.mul = q->multiplier;
    m.shift = q->shift;
    m.k = k;
    m.co = co;
    m.out_offset = p->output_offset;
    m.act_min = p->activation.min;
    m.act_max = p->activation.max;
    return m;
}

/* int16 elements of the two-pixel column buffer for k-element columns */
static int32_t cols_bytes(int32_t k)
{
    return 2 * ((k + 3) & ~3) * (int32_t)sizeof(int16_t);
}

int32_t arm_convolve_s8_get_buffer_size(const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims)
{
    return cols_bytes(filter_dims->h * filter_dims->w * input_dims->c);
}

/* One pixel's receptive field into a column (pixel slot `p`). */
static void im2col(int32_t *cols, int32_t p, const cmsis_nn_conv_params *cp, const cmsis_nn_dims *in,
                   const int8_t *input, const cmsis_nn_dims *f, int32_t oy, int32_t ox)
{
    const int32_t ci = in->c;
    int32_t *col = cols + 2 * p;
    int32_t k = 0;
    for (int32_t ky = 0; ky < f->h; ky++) {
        int32_t iy = oy * cp->stride.h - cp->padding.h + ky;
        if (iy < 0 || iy >= in->h) {
            col_put(col, k, NULL, f->w * ci, 0);
            k += f->w * ci;
            continue;
        }
        for (int32_t kx = 0; kx < f->w; kx++, k += ci) {
            int32_t ix = ox * cp->stride.w - cp->padding.w + kx;
            if (ix < 0 || ix >= in->w)
                col_put(col, k, NULL, ci, 0);
            else
                col_put(col, k, input + (iy * in->w + ix) * ci, ci, cp->input_offset);
        }
    }
}

arm_cmsis_nn_status arm_convolve_s8(const cmsis_nn_context *ctx, const cmsis_nn_conv_params *conv_params,
                                    const cmsis_nn_per_channel_quant_params *quant_params,
                                    const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                    const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                    const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                    const cmsis_nn_dims *upscale_dims, const cmsis_nn_dims *output_dims,
                                    int8_t *output_data)
{
    (void)bias_dims;
    const int32_t k = filter_dims->h * filter_dims->w * input_dims->c;
    if (ctx == NULL || ctx->buf == NULL || ctx->size < cols_bytes(k) || filter_dims->c != input_dims->c ||
        conv_params->dilation.w != 1 || conv_params->dilation.h != 1 ||
        (upscale_dims && (upscale_dims->h != 1 || upscale_dims->w != 1)))
        return ARM_CMSIS_NN_ARG_ERROR;
    const tsr_mm_t m = mm_params(conv_params, quant_params, filter_data, bias_data, k, output_dims->c);
    int32_t *cols = (int32_t *)ctx->buf;
    const int32_t pixels = output_dims->h * output_dims->w;
    const int32_t in_image = input_dims->h * input_dims->w * input_dims->c;
    const int32_t out_image = pixels * output_dims->c;
    for (int32_t n = 0; n < input_dims->n; n++) {
        const int8_t *in = input_data + n * in_image;
        int8_t *out = output_data + n * out_image;
        int32_t p = 0;
        for (; p + 1 < pixels; p += 2) {
            im2col(cols, 0, conv_params, input_dims, in, filter_dims, p / output_dims->w, p % output_dims->w);
            im2col(cols, 1, conv_params, input_dims, in, filter_dims, (p + 1) / output_dims->w,
                   (p + 1) % output_dims->w);
            mm_2px(&m, cols, out + p * m.co, out + (p + 1) * m.co);
        }
        if (p < pixels) {
            im2col(cols, 0, conv_params, input_dims, in, filter_dims, p / output_dims->w, p % output_dims->w);
            mm_1px(&m, cols, out + p * m.co);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

/* Pointwise: each input pixel is already its own column; it only needs
 * converting to int16 (a buffer of two columns in ctx). */
arm_cmsis_nn_status arm_convolve_1x1_s8_fast(const cmsis_nn_context *ctx, const cmsis_nn_conv_params *conv_params,
                                             const cmsis_nn_per_channel_quant_params *quant_params,
                                             const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                             const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                             const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                             const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)filter_dims;
    (void)bias_dims;
    const int32_t ci = input_dims->c;
    if (conv_params->padding.w != 0 || conv_params->padding.h != 0 || conv_params->stride.w != 1 ||
        conv_params->stride.h != 1 || ctx == NULL || ctx->buf == NULL || ctx->size < cols_bytes(ci))
        return ARM_CMSIS_NN_ARG_ERROR;
    const tsr_mm_t m = mm_params(conv_params, quant_params, filter_data, bias_data, ci, output_dims->c);
    int32_t *cols = (int32_t *)ctx->buf;
    const int32_t pixels = input_dims->n * input_dims->h * input_dims->w;
    int32_t p = 0;
    for (; p + 1 < pixels; p += 2) {
        col_put(cols, 0, input_data + p * ci, ci, conv_params->input_offset);
        col_put(cols + 2, 0, input_data + (p + 1) * ci, ci, conv_params->input_offset);
        mm_2px(&m, cols, output_data + p * m.co, output_data + (p + 1) * m.co);
    }
    if (p < pixels) {
        col_put(cols, 0, input_data + p * ci, ci, conv_params->input_offset);
        mm_1px(&m, cols, output_data + p * m.co);
    }
    return ARM_CMSIS_NN_SUCCESS;
}
