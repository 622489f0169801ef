/*
 * Fused depthwise/pointwise steps (kernels.h: tsr_dw_pw_args_t,
 * tsr_pw_dw_args_t) on the CMSIS-NN API: the library's own layer kernels
 * over an intermediate that never leaves L1 (DTCM). One core.
 *
 * Everything per channel that the layer glue (glue.c) rebuilds on every
 * call is built once per band here, in dw.scratch: both layers'
 * multipliers and shifts in CMSIS-NN's form and the depthwise filter in
 * CMSIS-NN's [kh][kw][c] order; the CMSIS-NN functions' own buffers
 * follow. That is what kernels/cmsis_nn/library.yaml reserves for the two
 * layers apart (the fused tiler adds both, fusion/tiler.py `layers`).
 *
 * DW->PW, row-wise: per block of fd output rows, all channels, the
 * depthwise (arm_depthwise_conv_3x3_s8 when it applies) into a->buf, then
 * the pointwise (arm_convolve_1x1_s8_fast) over the block into the band's
 * output rows. HWC throughout: the CMSIS-NN API takes only HWC tensors, its
 * depthwise runs four channels per word along a pixel, and its 1x1 kernel
 * reads each pixel's channels as one contiguous column, so a block of rows
 * is directly both kernels' tensor (no reordering).
 *
 * PW->DW, channel-wise: per block of fd channels, the pointwise of those
 * channels (its weight rows, bias and requantization from channel c on:
 * contiguous slices) over the band into a->buf ([in_h][in_w][fd], a compact
 * HWC tensor of fd channels), then the depthwise of that tensor. The API
 * writes dense HWC only, so when fd < C the depthwise writes a compact
 * block after the intermediate and it is copied into its channels of the
 * band's output; with fd == C it writes the output directly.
 *
 * PW->DW, row-wise with the shifted buffer (tessera/pw_dw_rows.h): per
 * block of fd depthwise output rows, the rows the previous block's windows
 * share with this one are moved to the top of a->buf, the library's 1x1
 * convolution computes only the new pointwise rows (all channels, HWC)
 * below them, then the library's depthwise runs over the block's rows into
 * its rows of the band's output. HWC throughout for the same reasons as
 * DW->PW; every channel at once, so unlike channel-wise neither layer's
 * constants nor outputs are sliced or copied.
 *
 * Layers with TFLite's or tessera's other requantizations run on the
 * library's cores (mm.c, dw.c) in their form instead of CMSIS-NN's API,
 * with the same buffers. A call the CMSIS-NN functions refuse falls back
 * to the reference layer kernel for that block (not with TSR_CMSIS_STRICT,
 * tests only).
 */
#include <stddef.h>
#include <string.h>

#include "arm_nnfunctions.h"
#include "tessera/cmsis_nn.h"
#include "tsr_glue.h"

/* the row-wise step's shift: picolibc's memmove is a byte loop behind a
 * call (one 64 x 96 row: ~25k instructions on stm32h7); rows move down in
 * the buffer, so an ascending copy is safe, a word at a time when aligned */
static void move_down(int8_t *dst, const int8_t *src, size_t n)
{
    size_t i = 0;
    if ((((size_t)dst | (size_t)src) & 3) == 0) {
        for (; i + 16 <= n; i += 16) {
            uint32_t v0, v1, v2, v3;
            memcpy(&v0, src + i, 4);
            memcpy(&v1, src + i + 4, 4);
            memcpy(&v2, src + i + 8, 4);
            memcpy(&v3, src + i + 12, 4);
            memcpy(dst + i, &v0, 4);
            memcpy(dst + i + 4, &v1, 4);
            memcpy(dst + i + 8, &v2, 4);
            memcpy(dst + i + 12, &v3, 4);
        }
        for (; i + 4 <= n; i += 4) {
            uint32_t v;
            memcpy(&v, src + i, 4);
            memcpy(dst + i, &v, 4);
        }
    }
    for (; i < n; i++)
        dst[i] = src[i];
}
#define TSR_PW_DW_ROWS_MOVE move_down
#include "tessera/pw_dw_rows.h"


static cmsis_nn_conv_params pw_params(const tsr_conv_args_t *a)
{
    cmsis_nn_conv_params p;
    p.input_offset = a->input_offset;
    p.output_offset = a->rq->zero_point;
    p.stride.w = 1;
    p.stride.h = 1;
    p.padding.w = 0;
    p.padding.h = 0;
    p.dilation.w = 1;
    p.dilation.h = 1;
    p.activation.min = a->rq->lo;
    p.activation.max = a->rq->hi;
    return p;
}

/* Which way a layer of the step runs: CMSIS-NN's API (-1: its half-up
 * requantization, CMSIS-NN's arrays q) or the cores in TFLite's form or
 * tessera's others (tsr_rq.h), as the code generator picks a layer's entry
 * point (codegen/libraries/cmsis_nn.py). */
static int core_mode(const tsr_requant_t *rq, int32_t channels)
{
    if (rq->rounding == TSR_ROUND_TFLITE)
        return TSR_RQ_TFL;
    if (rq->rounding != TSR_ROUND_HALF_UP || rq->add || rq->divisor > 1)
        return TSR_RQ_K64;
    for (int32_t c = 0; c < (rq->per_channel ? channels : 1); c++)
        if (rq->shift[c] < 1 || rq->shift[c] > 62 || rq->mul[c] < 0)
            return TSR_RQ_K64;
    return -1;
}

/* The depthwise of tile d (as glue.c chooses among CMSIS-NN's kernels),
 * filter w in [kh][kw][c] order, quant q; the reference kernel if refused. */
static void depthwise(const cmsis_nn_context *ctx, const tsr_conv_args_t *d, const int8_t *w,
                      const cmsis_nn_per_channel_quant_params *q)
{
    const int32_t c = d->out_c;
    const int mode = core_mode(d->rq, c);
    if (mode >= 0) {
        tsr_dwk_t k;
        k.g = tsr_glue_geom(d);
        k.c = c;
        k.w = w;
        k.wx = ctx->size >= 2 * d->kh * d->kw * c ? (int32_t *)ctx->buf : NULL;
        k.room = ctx->size;
        k.bias = d->bias;
        k.q = tsr_rqp_tessera(d->rq);
        tsr_dw(&k, mode);
        return;
    }
    cmsis_nn_dw_conv_params p = dw_params(d);
    cmsis_nn_dims in = dims(1, d->in_h, d->in_w, c), f = dims(1, d->kh, d->kw, c);
    cmsis_nn_dims b = dims(1, 1, 1, c), out = dims(1, d->out_h, d->out_w, c);
    arm_cmsis_nn_status st;
    f.n = 1;
    if (d->kh == 3 && d->kw == 3 && d->pad_t <= 1 && d->pad_l <= 1 && d->pad_b <= 1 && d->pad_r <= 1)
        st = arm_depthwise_conv_3x3_s8(ctx, &p, q, &in, d->in, &f, w, &b, d->bias, &out, d->out);
    else if (ctx->size >= arm_depthwise_conv_s8_opt_get_buffer_size(&in, &f))
        st = arm_depthwise_conv_s8_opt(ctx, &p, q, &in, d->in, &f, w, &b, d->bias, &out, d->out);
    else
        st = arm_depthwise_conv_s8(ctx, &p, q, &in, d->in, &f, w, &b, d->bias, &out, d->out);
    if (st != ARM_CMSIS_NN_SUCCESS)
        FALLBACK(tsr_depthwise(d, 0, 1));
}

/* The pointwise of tile p (arm_convolve_1x1_s8_fast); the reference kernel
 * if refused. */
static void pointwise(const cmsis_nn_context *ctx, const tsr_conv_args_t *p, const cmsis_nn_per_channel_quant_params *q)
{
    const int mode = core_mode(p->rq, p->out_c);
    if (mode >= 0) {
        const tsr_mm_t m = tsr_glue_mm(p, p->in_c);
        if (!tsr_mm_pointwise(&m, p->in, p->in_h * p->in_w, p->input_offset, (int8_t *)p->out, (int32_t *)ctx->buf,
                              ctx->size, mode))
            FALLBACK(tsr_pointwise(p, 0, 1));
        return;
    }
    cmsis_nn_conv_params cp = pw_params(p);
    cmsis_nn_dims in = dims(1, p->in_h, p->in_w, p->in_c), f = dims(1, 1, 1, p->in_c);
    cmsis_nn_dims b = dims(1, 1, 1, p->out_c), out = dims(1, p->out_h, p->out_w, p->out_c);
    f.n = p->out_c;
    if (arm_convolve_1x1_s8_fast(ctx, &cp, q, &in, p->in, &f, p->weights, &b, p->bias, &out, p->out) !=
        ARM_CMSIS_NN_SUCCESS)
        FALLBACK(tsr_pointwise(p, 0, 1));
}

void tsr_cmsis_dw_pw(const tsr_dw_pw_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    const tsr_conv_args_t *dw = &a->dw;
    const int32_t C = dw->out_c, Co = a->pw.out_c, Wo = dw->out_w, taps = dw->kh * dw->kw;
    const int32_t fd = a->fd > 0 ? a->fd : dw->out_h;
    const size_t in_row = (size_t)dw->in_w * dw->in_c;
    int32_t *dmul = (int32_t *)(void *)dw->scratch, *dshift = dmul + C, *pmul = dshift + C, *pshift = pmul + Co;
    int8_t *w = (int8_t *)(pshift + Co);
    cmsis_nn_per_channel_quant_params dq, pq;
    cmsis_nn_context ctx;
    tsr_conv_args_t d = *dw, p = a->pw;

    quant_fill(dw->rq, dmul, dshift, C);
    quant_fill(a->pw.rq, pmul, pshift, Co);
    dq.multiplier = dmul;
    dq.shift = dshift;
    pq.multiplier = pmul;
    pq.shift = pshift;
    dw_filter(w, dw->weights, taps, C);
    ctx.buf = w + align4(taps * C);
    ctx.size = dw->scratch_bytes - 8 * (C + Co) - align4(taps * C);

    d.out = a->buf;
    p.in = a->buf;
    p.in_w = Wo;
    p.in_c = C;
    p.out_w = Wo;
    for (int32_t y = 0, n; y < dw->out_h; y += n) {
        /* the block's padded input rows [v0, v1], the part inside the band's tile */
        n = dw->out_h - y < fd ? dw->out_h - y : fd;
        const int32_t v0 = y * dw->sh - dw->pad_t, v1 = (y + n - 1) * dw->sh - dw->pad_t + dw->kh - 1;
        const int32_t i0 = v0 > 0 ? v0 : 0, i1 = v1 < dw->in_h - 1 ? v1 : dw->in_h - 1;
        d.in = dw->in + (size_t)i0 * in_row;
        d.in_h = i1 - i0 + 1;
        d.pad_t = i0 - v0;
        d.pad_b = v1 - i1;
        d.out_h = n;
        depthwise(&ctx, &d, w, &dq);
        p.in_h = n;
        p.out_h = n;
        p.out = (int8_t *)a->pw.out + (size_t)y * Wo * Co;
        pointwise(&ctx, &p, &pq);
    }
}

/* n channels of every pixel, compact in src, into dst (a stride of C per
 * pixel); a word at a time when everything is word-aligned */
static void scatter(int8_t *dst, int32_t C, const int8_t *src, int32_t n, size_t pixels)
{
    if (((C | n | (int32_t)(size_t)dst) & 3) == 0) {
        for (size_t px = 0; px < pixels; px++, dst += C, src += n)
            for (int32_t j = 0; j < n; j += 4) {
                uint32_t v;
                memcpy(&v, src + j, 4);
                memcpy(dst + j, &v, 4);
            }
        return;
    }
    for (size_t px = 0; px < pixels; px++, dst += C, src += n)
        for (int32_t j = 0; j < n; j++)
            dst[j] = src[j];
}

void tsr_cmsis_pw_dw(const tsr_pw_dw_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    const tsr_conv_args_t *pw = &a->pw, *dw = &a->dw;
    const int32_t C = dw->out_c, Ci = pw->in_c, taps = dw->kh * dw->kw;
    const int32_t fd = a->fd > 0 && a->fd < C ? a->fd : C;
    const size_t pixels = (size_t)dw->out_h * dw->out_w;
    int32_t *pmul = (int32_t *)(void *)dw->scratch, *pshift = pmul + C, *dmul = pshift + C, *dshift = dmul + C;
    int8_t *w = (int8_t *)(dshift + C);
    /* the depthwise's compact output block (fd < C), word-aligned after the intermediate */
    int8_t *block = a->buf + align4((int32_t)((size_t)pw->in_h * pw->in_w * fd));
    cmsis_nn_per_channel_quant_params pq, dq;
    cmsis_nn_context ctx;
    tsr_conv_args_t p = *pw, d = *dw;
    tsr_requant_t prq = *pw->rq, drq = *dw->rq;

    quant_fill(pw->rq, pmul, pshift, C);
    quant_fill(dw->rq, dmul, dshift, C);
    /* the filter block by block, each block [kh][kw][n] (CMSIS-NN's order for
     * a tensor of n channels): block c0 starts at c0 * taps */
    for (int32_t c0 = 0, n; c0 < C; c0 += n) {
        n = C - c0 < fd ? C - c0 : fd;
        for (int32_t t = 0; t < taps; t++)
            for (int32_t j = 0; j < n; j++)
                w[c0 * taps + t * n + j] = dw->weights[(c0 + j) * taps + t];
    }
    ctx.buf = w + align4(taps * C);
    ctx.size = dw->scratch_bytes - 16 * C - align4(taps * C);

    p.out = a->buf;
    p.out_h = pw->in_h;
    p.out_w = pw->in_w;
    p.rq = &prq;
    d.in = a->buf;
    d.rq = &drq;
    for (int32_t c0 = 0, n; c0 < C; c0 += n) {
        n = C - c0 < fd ? C - c0 : fd;
        /* channels [c0, c0 + n): the slices of both layers' per-channel arrays */
        p.weights = pw->weights + (size_t)c0 * Ci;
        p.bias = pw->bias ? pw->bias + c0 : NULL;
        p.out_c = n;
        if (prq.per_channel) {
            prq.mul = pw->rq->mul + c0;
            prq.shift = pw->rq->shift + c0;
            prq.add = pw->rq->add ? pw->rq->add + c0 : NULL;
        }
        pq.multiplier = pmul + c0;
        pq.shift = pshift + c0;
        pointwise(&ctx, &p, &pq);
        d.in_c = n;
        d.out_c = n;
        d.weights = dw->weights + (size_t)c0 * taps;    /* the reference fallback's order */
        d.bias = dw->bias ? dw->bias + c0 : NULL;
        d.out = n == C ? dw->out : block;
        if (drq.per_channel) {
            drq.mul = dw->rq->mul + c0;
            drq.shift = dw->rq->shift + c0;
            drq.add = dw->rq->add ? dw->rq->add + c0 : NULL;
        }
        dq.multiplier = dmul + c0;
        dq.shift = dshift + c0;
        depthwise(&ctx, &d, w + (size_t)c0 * taps, &dq);
        if (n < C)
            scatter((int8_t *)dw->out + c0, C, block, n, pixels);
    }
}

void tsr_cmsis_pw_dw_rows(const tsr_pw_dw_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    const tsr_conv_args_t *pw = &a->pw, *dw = &a->dw;
    const int32_t C = dw->out_c, taps = dw->kh * dw->kw;
    int32_t *pmul = (int32_t *)(void *)dw->scratch, *pshift = pmul + C, *dmul = pshift + C, *dshift = dmul + C;
    int8_t *w = (int8_t *)(dshift + C);
    cmsis_nn_per_channel_quant_params pq, dq;
    cmsis_nn_context ctx;
    tsr_pw_dw_args_t rows = *a;
    tsr_conv_args_t p, d;

    quant_fill(pw->rq, pmul, pshift, C);
    quant_fill(dw->rq, dmul, dshift, C);
    pq.multiplier = pmul;
    pq.shift = pshift;
    dq.multiplier = dmul;
    dq.shift = dshift;
    dw_filter(w, dw->weights, taps, C);
    ctx.buf = w + align4(taps * C);
    ctx.size = dw->scratch_bytes - 16 * C - align4(taps * C);

    rows.fd = a->fd > 0 ? a->fd : dw->out_h;
    for (int32_t y = 0, n; y < dw->out_h; y += n) {
        n = dw->out_h - y < rows.fd ? dw->out_h - y : rows.fd;
        /* shifts the kept rows up; p: the new rows, d: the block */
        tsr_pw_dw_rows_plan(&rows, y, n, y == 0, &p, &d);
        if (p.in_h > 0)
            pointwise(&ctx, &p, &pq);
        depthwise(&ctx, &d, w, &dq);
    }
}
