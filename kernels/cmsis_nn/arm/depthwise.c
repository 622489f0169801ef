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
 * per output pixel, and a 3x3 window inside the input runs as nine
 * unrolled taps. Groups of four channels are the outer loop, so their
 * requantization constants are worked out once. Windows are clipped to the
 * input, so padded taps cost nothing and contribute 0.
 */
#include "arm_nnfunctions.h"
#include "tsr_dsp.h"

typedef struct {
    const int8_t *in;
    int32_t in_h, in_w, c;
    const int8_t *w;          /* [kh][kw][c] */
    const int32_t *wx;        /* sign-extended filter, [c/4][kh*kw][2] words, or NULL */
    const int32_t *bias;
    const int32_t *mul, *shift;
    int32_t kh, kw, sh, sw, pt, pl;
    int32_t in_off, out_off, act_min, act_max;
    int8_t *out;
    int32_t out_h, out_w;
} tsr_dw_t;

/* the requantization of four channels, worked out once per call */
typedef struct {
    int32_t bias[4];
    tsr_rq_t rq[4];
} tsr_dw_q4_t;

/* Requantize and store one channel of a group. `fast`: the channel is on
 * the short form (tsr_dsp.h); `full`: the clamp is int8's own range, one
 * ssat. Both are constants where it is called, so each combination
 * compiles to its own branch-free code. */
TSR_INLINE void dw_store1(int8_t *out, int32_t acc, tsr_rq_t rq, int32_t zp, int32_t lo, int32_t hi, int fast,
                          int full)
{
    int32_t v;
    if (fast)
        v = ((int32_t)(((int64_t)acc * rq.mul) >> 32) + rq.round) >> rq.shift;
    else
        v = tsr_rq_apply(acc, rq);
    *out = (int8_t)(full ? tsr_sat8(v + zp) : tsr_clamp(v + zp, lo, hi));
}

TSR_INLINE void dw_store4(int8_t *out, const tsr_dw_q4_t *q, const int32_t *acc, int32_t zp, int32_t lo,
                          int32_t hi, int fast, int full)
{
    dw_store1(out, acc[0], q->rq[0], zp, lo, hi, fast, full);
    dw_store1(out + 1, acc[1], q->rq[1], zp, lo, hi, fast, full);
    dw_store1(out + 2, acc[2], q->rq[2], zp, lo, hi, fast, full);
    dw_store1(out + 3, acc[3], q->rq[3], zp, lo, hi, fast, full);
}

/* The assembly needs 13 registers: not with a frame pointer (-O0). */
#if TSR_HAVE_DSP && defined(__OPTIMIZE__)
#define TSR_DW_ASM 1
#else
#define TSR_DW_ASM 0
#endif

#if TSR_DW_ASM
/* One tap: the input word at ADDR (four channels), the filter pairs at
 * byte offset WOFF of wg; two int16 lanes per operand, one MAC each. */
#define TAP(ADDR, WOFF)                                        \
    "ldr %[x], " ADDR "\n\t"                                   \
    "ldrd %[w02], %[w13], [%[wg], #" WOFF "]\n\t"              \
    "sxtab16 %[x02], %[off2], %[x]\n\t"                        \
    "sxtab16 %[x], %[off2], %[x], ror #8\n\t"                  \
    "smlabb %[a0], %[x02], %[w02], %[a0]\n\t"                  \
    "smlatt %[a2], %[x02], %[w02], %[a2]\n\t"                  \
    "smlabb %[a1], %[x], %[w13], %[a1]\n\t"                    \
    "smlatt %[a3], %[x], %[w13], %[a3]\n\t"
#endif

/* The nine taps of a 3x3 window wholly inside the input, four channels:
 * p is the window's top-left word, c the pixel stride, row the row stride,
 * wg the group's sign-extended filter (nine pairs of words). Written out
 * in assembly so that the 13 values it needs stay in registers. */
TSR_INLINE void dw_3x3(const int8_t *p, int32_t c, int32_t row, const int32_t *wg, int32_t off2,
                          int32_t *acc)
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
#if TSR_DW_ASM
    int32_t x, x02, w02, w13;
    __asm__(TAP("[%[p]]", "0") TAP("[%[p], %[c]]", "8") TAP("[%[p], %[c], lsl #1]", "16")
            "add %[p], %[p], %[row]\n\t"
            TAP("[%[p]]", "24") TAP("[%[p], %[c]]", "32") TAP("[%[p], %[c], lsl #1]", "40")
            "add %[p], %[p], %[row]\n\t"
            TAP("[%[p]]", "48") TAP("[%[p], %[c]]", "56") TAP("[%[p], %[c], lsl #1]", "64")
            : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [p] "+&r"(p), [x] "=&r"(x),
              [x02] "=&r"(x02), [w02] "=&r"(w02), [w13] "=&r"(w13)
            : [c] "r"(c), [row] "r"(row), [wg] "r"(wg), [off2] "r"(off2)
            : "memory");
#else
    for (int32_t ky = 0; ky < 3; ky++)
        for (int32_t kx = 0; kx < 3; kx++) {
            uint32_t x = tsr_ld32(p + ky * row + kx * c);
            int32_t x02 = tsr_sxtab16(off2, x), x13 = tsr_sxtab16_ror8(off2, x);
            const int32_t *w = wg + (ky * 3 + kx) * 2;
            a0 = tsr_smlabb(x02, w[0], a0);
            a2 = tsr_smlatt(x02, w[0], a2);
            a1 = tsr_smlabb(x13, w[1], a1);
            a3 = tsr_smlatt(x13, w[1], a3);
        }
#endif
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* Taps [ky0, ky1) x [kx0, kx1) of the window at p (its top-left corner),
 * four channels from group g. */
static void dw_taps(const tsr_dw_t *d, const int8_t *p, int32_t g, int32_t ky0, int32_t ky1, int32_t kx0,
                    int32_t kx1, int32_t *acc)
{
    const int32_t c = d->c, off2 = tsr_dup16(d->in_off), n = kx1 - kx0;
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    for (int32_t ky = ky0; ky < ky1; ky++) {
        const int8_t *x = p + (ky * d->in_w + kx0) * c;
        if (d->wx) {
            const int32_t *w = d->wx + (g * d->kh * d->kw + ky * d->kw + kx0) * 2;
            for (int32_t k = n; k > 0; k--, x += c, w += 2) {
                uint32_t v = tsr_ld32(x);
                int32_t x02 = tsr_sxtab16(off2, v), x13 = tsr_sxtab16_ror8(off2, v);
                a0 = tsr_smlabb(x02, w[0], a0);
                a2 = tsr_smlatt(x02, w[0], a2);
                a1 = tsr_smlabb(x13, w[1], a1);
                a3 = tsr_smlatt(x13, w[1], a3);
            }
        } else {
            const int8_t *w = d->w + (ky * d->kw + kx0) * c + g * 4;
            for (int32_t k = n; k > 0; k--, x += c, w += c) {
                uint32_t v = tsr_ld32(x), wv = tsr_ld32(w);
                int32_t x02 = tsr_sxtab16(off2, v), x13 = tsr_sxtab16_ror8(off2, v);
                int32_t w02 = tsr_sxtb16(wv), w13 = tsr_sxtb16_ror8(wv);
                a0 = tsr_smlabb(x02, w02, a0);
                a2 = tsr_smlatt(x02, w02, a2);
                a1 = tsr_smlabb(x13, w13, a1);
                a3 = tsr_smlatt(x13, w13, a3);
            }
        }
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* An inner run of a row: n windows inside the input, 3x3, `step` bytes
 * apart, outputs `c` apart. Out of line, so that the 13 registers of the
 * unrolled taps are there for it; one copy per fast/full combination. */
typedef struct {
    int32_t c, row, step, off2, zp, lo, hi;
    const int32_t *wg;
    const tsr_dw_q4_t *q;
} tsr_dw_run_t;

#define DW3X3_RUN(NAME, FAST, FULL)                                                                 \
    static __attribute__((noinline)) void NAME(const int8_t *p, int8_t *o, int32_t n, const tsr_dw_run_t *r) \
    {                                                                                              \
        for (; n > 0; n--, p += r->step, o += r->c) {                                              \
            int32_t acc[4] = {r->q->bias[0], r->q->bias[1], r->q->bias[2], r->q->bias[3]};         \
            dw_3x3(p, r->c, r->row, r->wg, r->off2, acc);                                          \
            dw_store4(o, r->q, acc, r->zp, r->lo, r->hi, FAST, FULL);                              \
        }                                                                                          \
    }
DW3X3_RUN(dw3x3_run_fast_full, 1, 1)
DW3X3_RUN(dw3x3_run_fast, 1, 0)
DW3X3_RUN(dw3x3_run, 0, 0)

static void dw_run3x3(const int8_t *p, int8_t *o, int32_t n, const tsr_dw_run_t *r, int fast, int full)
{
    if (n <= 0)
        return;
    if (fast && full)
        dw3x3_run_fast_full(p, o, n, r);
    else if (fast)
        dw3x3_run_fast(p, o, n, r);
    else
        dw3x3_run(p, o, n, r);
}

/* A 3x3 filter for windows that hang one row or column over the input:
 * the window is moved inside by (sy, sx) and the filter with it, the taps
 * that would read the padding zeroed. wg: the group's nine tap pairs. */
static void dw_shifted(int32_t *dst, const int32_t *wg, int32_t sy, int32_t sx)
{
    const int32_t y0 = sy < 0 ? -sy : 0, y1 = sy > 0 ? 3 - sy : 3;
    const int32_t x0 = sx < 0 ? -sx : 0, x1 = sx > 0 ? 3 - sx : 3;
    for (int32_t i = 0; i < 18; i++)
        dst[i] = 0;
    for (int32_t ky = y0; ky < y1; ky++)
        for (int32_t kx = x0; kx < x1; kx++) {
            const int32_t *src = wg + ((ky + sy) * 3 + kx + sx) * 2;
            dst[(ky * 3 + kx) * 2] = src[0];
            dst[(ky * 3 + kx) * 2 + 1] = src[1];
        }
}

/* The output pixels of a group (channels [4g, 4g + 4)). A 3x3 filter with
 * at most one padded row or column per side (every MobileNet layer) runs
 * every pixel through the unrolled taps: windows over the border are
 * moved inside, with a filter moved the other way (dw_shifted). Other
 * filters go tap by tap, windows clipped to the input. */
static void dw_group_pixels(const tsr_dw_t *d, int32_t g, const tsr_dw_q4_t *q, int fast, int full)
{
    const int32_t c = d->c, ch = g * 4, zp = d->out_off, lo = d->act_min, hi = d->act_max;
    const int32_t step = d->sw * c, row = d->in_w * c;
    const int32_t over_b = (d->out_h - 1) * d->sh - d->pt + 3 - d->in_h;
    const int32_t over_r = (d->out_w - 1) * d->sw - d->pl + 3 - d->in_w;
    const int shifted = d->wx && d->kh == 3 && d->kw == 3 && d->in_h >= 3 && d->in_w >= 3 && d->pt <= 1 &&
                        d->pl <= 1 && over_b <= 1 && over_r <= 1;
    if (shifted) {
        /* by [row class][column class]: top/inside/bottom x left/inside/right;
         * only the classes that occur are made, the inside one is wg itself */
        int32_t filters[3][3][18];
        const int32_t *wf[3][3];
        const int32_t *wg = d->wx + g * 18;
        const int32_t rows[3] = {d->pt > 0, 1, over_b > 0}, cols[3] = {d->pl > 0, 1, over_r > 0};
        for (int32_t a = 0; a < 3; a++)
            for (int32_t b = 0; b < 3; b++) {
                wf[a][b] = wg;
                if ((a != 1 || b != 1) && rows[a] && cols[b]) {
                    dw_shifted(filters[a][b], wg, a == 0 ? 1 : a == 2 ? -1 : 0, b == 0 ? 1 : b == 2 ? -1 : 0);
                    wf[a][b] = filters[a][b];
                }
            }
        tsr_dw_run_t run;
        run.c = c;
        run.row = row;
        run.step = step;
        run.off2 = tsr_dup16(d->in_off);
        run.zp = zp;
        run.lo = lo;
        run.hi = hi;
        run.q = q;
        /* output columns: [0, ox_lo) hang over the left, [ox_hi, out_w) over the right */
        int32_t ox_lo = (d->pl + d->sw - 1) / d->sw;
        int32_t ox_hi = (d->in_w + d->pl - 3) / d->sw + 1;
        ox_lo = ox_lo > d->out_w ? d->out_w : ox_lo;
        ox_hi = ox_hi > d->out_w ? d->out_w : ox_hi < ox_lo ? ox_lo : ox_hi;
        for (int32_t oy = 0; oy < d->out_h; oy++) {
            const int32_t iy = oy * d->sh - d->pt;
            const int32_t a = iy < 0 ? 0 : iy + 3 > d->in_h ? 2 : 1;
            const int32_t sy = a == 0 ? 1 : a == 2 ? -1 : 0;
            const int8_t *p = d->in + ((iy + sy) * d->in_w - d->pl) * c + ch;
            int8_t *out = d->out + oy * d->out_w * c + ch;
            run.wg = wf[a][0];
            dw_run3x3(p + c, out, ox_lo, &run, fast, full);
            run.wg = wf[a][1];
            dw_run3x3(p + ox_lo * step, out + ox_lo * c, ox_hi - ox_lo, &run, fast, full);
            run.wg = wf[a][2];
            dw_run3x3(p + ox_hi * step - c, out + ox_hi * c, d->out_w - ox_hi, &run, fast, full);
        }
        return;
    }
    for (int32_t oy = 0; oy < d->out_h; oy++) {
        const int32_t iy = oy * d->sh - d->pt;
        const int32_t ky0 = iy < 0 ? -iy : 0;
        const int32_t ky1 = iy + d->kh > d->in_h ? d->in_h - iy : d->kh;
        int8_t *out = d->out + oy * d->out_w * c + ch;
        const int8_t *p = d->in + (iy * d->in_w - d->pl) * c + ch;
        for (int32_t ox = 0; ox < d->out_w; ox++) {
            const int32_t ix = ox * d->sw - d->pl;
            const int32_t kx0 = ix < 0 ? -ix : 0;
            const int32_t kx1 = ix + d->kw > d->in_w ? d->in_w - ix : d->kw;
            int32_t acc[4] = {q->bias[0], q->bias[1], q->bias[2], q->bias[3]};
            dw_taps(d, p + ox * step, g, ky0, ky1, kx0, kx1, acc);
            dw_store4(out + ox * c, q, acc, zp, lo, hi, fast, full);
        }
    }
}

static void dw_group(const tsr_dw_t *d, int32_t g)
{
    tsr_dw_q4_t q;
    int fast = 1;
    for (int32_t i = 0; i < 4; i++) {
        q.bias[i] = d->bias ? d->bias[g * 4 + i] : 0;
        q.rq[i] = tsr_rq_make(d->mul[g * 4 + i], d->shift[g * 4 + i]);
        fast &= q.rq[i].fast;
    }
    dw_group_pixels(d, g, &q, fast, d->act_min == -128 && d->act_max == 127);
}

/* A channel past the last group of four, every output pixel. */
static void dw_channel(const tsr_dw_t *d, int32_t ch)
{
    const int32_t c = d->c;
    const tsr_rq_t rq = tsr_rq_make(d->mul[ch], d->shift[ch]);
    for (int32_t oy = 0; oy < d->out_h; oy++)
        for (int32_t ox = 0; ox < d->out_w; ox++) {
            int32_t acc = d->bias ? d->bias[ch] : 0;
            for (int32_t ky = 0; ky < d->kh; ky++) {
                const int32_t iy = oy * d->sh - d->pt + ky;
                if (iy < 0 || iy >= d->in_h)
                    continue;
                for (int32_t kx = 0; kx < d->kw; kx++) {
                    const int32_t ix = ox * d->sw - d->pl + kx;
                    if (ix >= 0 && ix < d->in_w)
                        acc += (d->in[(iy * d->in_w + ix) * c + ch] + d->in_off) * d->w[(ky * d->kw + kx) * c + ch];
                }
            }
            d->out[(oy * d->out_w + ox) * c + ch] =
                (int8_t)tsr_clamp(tsr_rq_apply(acc, rq) + d->out_off, d->act_min, d->act_max);
        }
}

static void dw_run(const tsr_dw_t *d)
{
    for (int32_t g = 0; g < d->c >> 2; g++)
        dw_group(d, g);
    for (int32_t ch = d->c & ~3; ch < d->c; ch++)
        dw_channel(d, ch);
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
        /* sign-extend the filter once, each group's taps together:
         * [group][tap] -> (w0, w2), (w1, w3) */
        int32_t *wx = (int32_t *)ctx->buf;
        for (int32_t g = 0; g < groups; g++)
            for (int32_t t = 0; t < taps; t++) {
                uint32_t w = tsr_ld32(filter + t * d.c + g * 4);
                wx[(g * taps + t) * 2] = tsr_sxtb16(w);
                wx[(g * taps + t) * 2 + 1] = tsr_sxtb16_ror8(w);
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
