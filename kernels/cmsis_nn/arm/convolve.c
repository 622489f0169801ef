/*
 * Convolutions with CMSIS-NN's API: arm_convolve_s8 (any kernel, im2col)
 * and arm_convolve_1x1_s8_fast (pointwise). Written for tessera.
 *
 * Both turn output pixels into int16 columns (input plus input_offset,
 * zero where the window hangs over the padding) and multiply them with the
 * int8 filter rows; each smlad does two MACs. Columns are "reordered" (see
 * tsr_dsp.h) and interleaved by groups of four elements, pixel after pixel,
 * so one pointer walks them all. With room for four columns in the context
 * buffer, one filter row at a time meets four pixels (each filter word is
 * loaded and sign-extended once for four pixels, in an assembly loop that
 * keeps its 11 values in registers); with room for two, two filter rows
 * meet two pixels (ARM's buffer size for arm_convolve_s8).
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
    int32_t common;           /* every channel on the short requantization, int8's whole range */
} tsr_mm_t;

/* int16 position of element k of pixel 0 in columns of P interleaved pixels */
static inline int32_t col_index(int32_t k, int32_t P)
{
    static const uint8_t lane[4] = {0, 2, 1, 3};
    return (k >> 2) * 4 * P + lane[k & 3];
}

static inline void st16(int32_t *col, int32_t index, int32_t v)
{
    int16_t h = (int16_t)v;
    memcpy((int16_t *)col + index, &h, 2);
}

/* Elements [k, k + n) of one pixel's column (col: that pixel's first
 * words, P pixels interleaved): n values of src plus offset, or zeros when
 * src is NULL. */
static void col_put(int32_t *col, int32_t P, int32_t k, const int8_t *src, int32_t n, int32_t offset)
{
    if ((k & 3) == 0) {
        const int32_t off2 = tsr_dup16(offset);
        int32_t *dst = col + (k >> 2) * 2 * P;
        if (src) {
            for (; n >= 4; n -= 4, k += 4, src += 4, dst += 2 * P) {
                uint32_t x = tsr_ld32(src);
                dst[0] = tsr_sxtab16(off2, x);
                dst[1] = tsr_sxtab16_ror8(off2, x);
            }
        } else {
            for (; n >= 4; n -= 4, k += 4, dst += 2 * P)
                dst[0] = dst[1] = 0;
        }
    }
    for (; n > 0; n--, k++)
        st16(col, col_index(k, P), src ? *src++ + offset : 0);
}

/* Zeros after element k up to the end of its group of four: the last,
 * partial group then multiplies like a whole one. */
static void col_pad(int32_t *col, int32_t P, int32_t k)
{
    for (; k & 3; k++)
        st16(col, col_index(k, P), 0);
}

/* The first n (1..3) bytes of p as a word, the rest zero. */
static inline uint32_t ld_partial(const int8_t *p, int32_t n)
{
    uint32_t w = (uint8_t)p[0];
    if (n > 1)
        w |= (uint32_t)(uint8_t)p[1] << 8;
    if (n > 2)
        w |= (uint32_t)(uint8_t)p[2] << 16;
    return w;
}

/* One output: requantized, offset, clamped. On the common path (short
 * requantization form, int8's whole range) that is smull, add, asr, add,
 * ssat. */
TSR_INLINE int8_t mm_out(int32_t acc, tsr_rq_t r, int32_t zp, int32_t lo, int32_t hi, int common)
{
    if (common)
        return (int8_t)tsr_sat8((((int32_t)(((int64_t)acc * r.mul) >> 32) + r.round) >> r.shift) + zp);
    return (int8_t)tsr_clamp(tsr_rq_apply(acc, r) + zp, lo, hi);
}

/* The requantization of channel c; on the common path without branches
 * (s = 31 - shift >= 33 is known). */
TSR_INLINE tsr_rq_t mm_rq(const tsr_mm_t *m, int32_t c, int common)
{
    if (!common)
        return tsr_rq_make(m->mul[c], m->shift[c]);
    tsr_rq_t r;
    r.mul = m->mul[c];
    r.round = 1 << (-2 - m->shift[c]);
    r.shift = -1 - m->shift[c];
    r.fast = 1;
    return r;
}

/* Two output channels (c, c + 1) of two pixels from their accumulators. */
TSR_INLINE void mm_store_2x2(const tsr_mm_t *m, int32_t c, int32_t a00, int32_t a01, int32_t a10, int32_t a11,
                             int8_t *out0, int8_t *out1, int common)
{
    const tsr_rq_t r0 = mm_rq(m, c, common), r1 = mm_rq(m, c + 1, common);
    const int32_t zp = m->out_offset, lo = m->act_min, hi = m->act_max;
    out0[c] = mm_out(a00, r0, zp, lo, hi, common);
    out1[c] = mm_out(a01, r0, zp, lo, hi, common);
    out0[c + 1] = mm_out(a10, r1, zp, lo, hi, common);
    out1[c + 1] = mm_out(a11, r1, zp, lo, hi, common);
}

static inline int8_t finish(int32_t acc, const tsr_mm_t *m, int32_t c)
{
    return mm_out(acc, tsr_rq_make(m->mul[c], m->shift[c]), m->out_offset, m->act_min, m->act_max, 0);
}

/* Four MACs of two channels (filter words wa, wb) with two pixels' column
 * words (x0, x1 and y0, y1): one load and two sign extensions per filter
 * word serve both pixels. */
#define MM_2X2_GROUP(wa, wb, x0, x1, y0, y1)                   \
    do {                                                       \
        int32_t w02 = tsr_sxtb16(wa), w13 = tsr_sxtb16_ror8(wa); \
        a00 = tsr_smlad(w02, x0, a00);                         \
        a00 = tsr_smlad(w13, x1, a00);                         \
        a01 = tsr_smlad(w02, y0, a01);                         \
        a01 = tsr_smlad(w13, y1, a01);                         \
        w02 = tsr_sxtb16(wb);                                  \
        w13 = tsr_sxtb16_ror8(wb);                             \
        a10 = tsr_smlad(w02, x0, a10);                         \
        a10 = tsr_smlad(w13, x1, a10);                         \
        a11 = tsr_smlad(w02, y0, a11);                         \
        a11 = tsr_smlad(w13, y1, a11);                         \
    } while (0)

/* All output channels of two pixels (columns col, interleaved) into out0
 * and out1. `common` is a constant where it is called (mm_2px below). */
TSR_INLINE void mm_2px_body(const tsr_mm_t *mp, const int32_t *cols, int8_t *out0, int8_t *out1, int common)
{
    const tsr_mm_t m = *mp;   /* a local copy: stores through the int8 outputs cannot alias it */
    const int32_t k = m.k, groups = k >> 2, tail = k & 3;
    int32_t c = 0;
    for (; c + 1 < m.co; c += 2) {
        const int8_t *pa = m.w + c * k, *pb = pa + k;
        const int32_t *col = cols;
        int32_t b0 = m.bias ? m.bias[c] : 0, b1 = m.bias ? m.bias[c + 1] : 0;
        int32_t a00 = b0, a01 = b0, a10 = b1, a11 = b1;
        int32_t g = groups;
        for (; g >= 2; g -= 2) {   /* two groups per turn: half the loop overhead */
            uint32_t wa = tsr_ld32(pa), wb = tsr_ld32(pb);
            MM_2X2_GROUP(wa, wb, col[0], col[1], col[2], col[3]);
            wa = tsr_ld32(pa + 4);
            wb = tsr_ld32(pb + 4);
            MM_2X2_GROUP(wa, wb, col[4], col[5], col[6], col[7]);
            pa += 8;
            pb += 8;
            col += 8;
        }
        if (g) {
            uint32_t wa = tsr_ld32(pa), wb = tsr_ld32(pb);
            MM_2X2_GROUP(wa, wb, col[0], col[1], col[2], col[3]);
            pa += 4;
            pb += 4;
            col += 4;
        }
        if (tail) {   /* the columns are zero past k */
            uint32_t wa = ld_partial(pa, tail), wb = ld_partial(pb, tail);
            MM_2X2_GROUP(wa, wb, col[0], col[1], col[2], col[3]);
        }
        mm_store_2x2(&m, c, a00, a01, a10, a11, out0, out1, common);
    }
    if (c < m.co) {  /* an odd last channel */
        const int8_t *pa = m.w + c * k;
        const int32_t *col = cols;
        int32_t a00 = m.bias ? m.bias[c] : 0, a01 = a00;
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
        if (tail) {
            uint32_t wa = ld_partial(pa, tail);
            int32_t w02 = tsr_sxtb16(wa), w13 = tsr_sxtb16_ror8(wa);
            a00 = tsr_smlad(w02, col[0], a00);
            a00 = tsr_smlad(w13, col[1], a00);
            a01 = tsr_smlad(w02, col[2], a01);
            a01 = tsr_smlad(w13, col[3], a01);
        }
        out0[c] = finish(a00, &m, c);
        out1[c] = finish(a01, &m, c);
    }
}

static __attribute__((noinline)) void mm_2px_common(const tsr_mm_t *m, const int32_t *cols, int8_t *out0,
                                                   int8_t *out1)
{
    mm_2px_body(m, cols, out0, out1, 1);
}

static __attribute__((noinline)) void mm_2px_any(const tsr_mm_t *m, const int32_t *cols, int8_t *out0,
                                                int8_t *out1)
{
    mm_2px_body(m, cols, out0, out1, 0);
}

static void mm_2px(const tsr_mm_t *m, const int32_t *cols, int8_t *out0, int8_t *out1)
{
    if (m->common)
        mm_2px_common(m, cols, out0, out1);
    else
        mm_2px_any(m, cols, out0, out1);
}

/* All output channels of one pixel (pixel 0's slots of cols). */
static void mm_1px(const tsr_mm_t *mp, const int32_t *cols, int8_t *out)
{
    const tsr_mm_t m = *mp;
    const int32_t k = m.k, groups = k >> 2, tail = k & 3;
    int32_t c = 0;
    for (; c + 1 < m.co; c += 2) {
        const int8_t *pa = m.w + c * k, *pb = pa + k;
        const int32_t *col = cols;
        int32_t a0 = m.bias ? m.bias[c] : 0, a1 = m.bias ? m.bias[c + 1] : 0;
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
        if (tail) {
            uint32_t wa = ld_partial(pa, tail), wb = ld_partial(pb, tail);
            a0 = tsr_smlad(tsr_sxtb16(wa), col[0], a0);
            a0 = tsr_smlad(tsr_sxtb16_ror8(wa), col[1], a0);
            a1 = tsr_smlad(tsr_sxtb16(wb), col[0], a1);
            a1 = tsr_smlad(tsr_sxtb16_ror8(wb), col[1], a1);
        }
        out[c] = finish(a0, &m, c);
        out[c + 1] = finish(a1, &m, c + 1);
    }
    if (c < m.co) {
        const int8_t *pa = m.w + c * k;
        const int32_t *col = cols;
        int32_t a0 = m.bias ? m.bias[c] : 0;
        for (int32_t g = groups; g > 0; g--) {
            uint32_t wa = tsr_ld32(pa);
            a0 = tsr_smlad(tsr_sxtb16(wa), col[0], a0);
            a0 = tsr_smlad(tsr_sxtb16_ror8(wa), col[1], a0);
            pa += 4;
            col += 4;
        }
        if (tail) {
            uint32_t wa = ld_partial(pa, tail);
            a0 = tsr_smlad(tsr_sxtb16(wa), col[0], a0);
            a0 = tsr_smlad(tsr_sxtb16_ror8(wa), col[1], a0);
        }
        out[c] = finish(a0, &m, c);
    }
}

/* The assembly needs 11 registers: not with a frame pointer (-O0). */
#if TSR_HAVE_DSP && defined(__OPTIMIZE__)
#define TSR_MM_ASM 1
#else
#define TSR_MM_ASM 0
#endif

/* acc[0..3] += one filter row (k = 4 * groups + tail values) times four
 * interleaved columns. Per group of four values: one filter word loaded and
 * sign-extended once, four column pairs loaded with ldrd, eight smlad. The
 * assembly keeps its 11 values in registers. */
TSR_INLINE void mm_row4(const int8_t *w, const int32_t *col, int32_t groups, int32_t tail, int32_t *acc)
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
#if TSR_MM_ASM
#define MM_GROUP4                                   \
    "ldr %[wv], [%[w]], #4\n\t"                     \
    "ldrd %[x0], %[x1], [%[col]], #8\n\t"           \
    "sxtb16 %[t], %[wv]\n\t"                        \
    "sxtb16 %[wv], %[wv], ror #8\n\t"               \
    "smlad %[a0], %[t], %[x0], %[a0]\n\t"           \
    "smlad %[a0], %[wv], %[x1], %[a0]\n\t"          \
    "ldrd %[x0], %[x1], [%[col]], #8\n\t"           \
    "smlad %[a1], %[t], %[x0], %[a1]\n\t"           \
    "smlad %[a1], %[wv], %[x1], %[a1]\n\t"          \
    "ldrd %[x0], %[x1], [%[col]], #8\n\t"           \
    "smlad %[a2], %[t], %[x0], %[a2]\n\t"           \
    "smlad %[a2], %[wv], %[x1], %[a2]\n\t"          \
    "ldrd %[x0], %[x1], [%[col]], #8\n\t"           \
    "smlad %[a3], %[t], %[x0], %[a3]\n\t"           \
    "smlad %[a3], %[wv], %[x1], %[a3]\n\t"
    int32_t pairs = groups >> 1;
    if (pairs > 0) {
        /* two groups per turn: 15 instructions a group plus 2 a turn */
        int32_t wv, t, x0, x1;
        __asm__("1:\n\t" MM_GROUP4 MM_GROUP4
                "subs %[n], %[n], #1\n\t"
                "bne 1b"
                : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [w] "+r"(w), [col] "+r"(col),
                  [n] "+r"(pairs), [wv] "=&r"(wv), [t] "=&r"(t), [x0] "=&r"(x0), [x1] "=&r"(x1)
                :
                : "cc", "memory");
    }
    groups &= 1;
#endif
    for (; groups > 0; groups--, w += 4, col += 8) {
        uint32_t wv = tsr_ld32(w);
        int32_t w02 = tsr_sxtb16(wv), w13 = tsr_sxtb16_ror8(wv);
        a0 = tsr_smlad(w13, col[1], tsr_smlad(w02, col[0], a0));
        a1 = tsr_smlad(w13, col[3], tsr_smlad(w02, col[2], a1));
        a2 = tsr_smlad(w13, col[5], tsr_smlad(w02, col[4], a2));
        a3 = tsr_smlad(w13, col[7], tsr_smlad(w02, col[6], a3));
    }
    if (tail) {   /* the columns are zero past k */
        uint32_t wv = ld_partial(w, tail);
        int32_t w02 = tsr_sxtb16(wv), w13 = tsr_sxtb16_ror8(wv);
        a0 = tsr_smlad(w13, col[1], tsr_smlad(w02, col[0], a0));
        a1 = tsr_smlad(w13, col[3], tsr_smlad(w02, col[2], a1));
        a2 = tsr_smlad(w13, col[5], tsr_smlad(w02, col[4], a2));
        a3 = tsr_smlad(w13, col[7], tsr_smlad(w02, col[6], a3));
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* All output channels of npix (1..4) pixels whose columns are interleaved
 * by four; pixel p's outputs at out + p * co. */
TSR_INLINE void mm_4px_body(const tsr_mm_t *mp, const int32_t *cols, int8_t *out, int32_t npix, int common)
{
    const tsr_mm_t m = *mp;
    const int32_t k = m.k, co = m.co, zp = m.out_offset, lo = m.act_min, hi = m.act_max;
    for (int32_t c = 0; c < co; c++, out++) {
        const int32_t b = m.bias ? m.bias[c] : 0;
        int32_t acc[4] = {b, b, b, b};
        mm_row4(m.w + c * k, cols, k >> 2, k & 3, acc);
        const tsr_rq_t r = mm_rq(&m, c, common);
        out[0] = mm_out(acc[0], r, zp, lo, hi, common);
        if (npix > 1)
            out[co] = mm_out(acc[1], r, zp, lo, hi, common);
        if (npix > 2)
            out[2 * co] = mm_out(acc[2], r, zp, lo, hi, common);
        if (npix > 3)
            out[3 * co] = mm_out(acc[3], r, zp, lo, hi, common);
    }
}

static __attribute__((noinline)) void mm_4px_common(const tsr_mm_t *m, const int32_t *cols, int8_t *out)
{
    mm_4px_body(m, cols, out, 4, 1);
}

static __attribute__((noinline)) void mm_4px_any(const tsr_mm_t *m, const int32_t *cols, int8_t *out,
                                                int32_t npix)
{
    mm_4px_body(m, cols, out, npix, 0);
}

static void mm_4px(const tsr_mm_t *m, const int32_t *cols, int8_t *out, int32_t npix)
{
    if (m->common && npix == 4)
        mm_4px_common(m, cols, out);
    else
        mm_4px_any(m, cols, out, npix);
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
    m.common = m.act_min == -128 && m.act_max == 127;
    for (int32_t c = 0; c < co && m.common; c++)
        m.common = m.shift[c] <= -2;   /* s = 31 - shift >= 33 */
    return m;
}

/* bytes of P interleaved k-element columns */
static int32_t cols_bytes(int32_t k, int32_t P)
{
    return P * ((k + 3) & ~3) * (int32_t)sizeof(int16_t);
}

int32_t arm_convolve_s8_get_buffer_size(const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims)
{
    return cols_bytes(filter_dims->h * filter_dims->w * input_dims->c, 2);
}

/* Bytes gathered on the stack when input channels are not a multiple of 4 */
#define GATHER_MAX 512

/* One pixel's receptive field into a column (pixel slot `p`), zero-padded
 * to a whole last group. With C_IN a multiple of 4, every (ky, kx) run
 * starts a group and converts in place; otherwise the window is first
 * gathered as int8 (padding as -input_offset, which the offset turns into
 * 0: input_offset is in [-127, 128]) and converted in one pass. */
static void im2col(int32_t *cols, int32_t P, int32_t p, const cmsis_nn_conv_params *cp, const cmsis_nn_dims *in,
                   const int8_t *input, const cmsis_nn_dims *f, int32_t oy, int32_t ox)
{
    const int32_t ci = in->c, k = f->h * f->w * ci, run = f->w * ci;
    const int32_t iy0 = oy * cp->stride.h - cp->padding.h, ix0 = ox * cp->stride.w - cp->padding.w;
    const int32_t kx0 = ix0 < 0 ? -ix0 : 0, kx1 = ix0 + f->w > in->w ? in->w - ix0 : f->w;
    int32_t *col = cols + 2 * p;
    if ((ci & 3) && k <= GATHER_MAX - 3 && kx1 > kx0) {
        int8_t patch[GATHER_MAX];
        const int8_t pad = (int8_t)-cp->input_offset;
        const int32_t valid = (kx1 - kx0) * ci, before = kx0 * ci, after = (f->w - kx1) * ci;
        int8_t *dst = patch;
        for (int32_t ky = 0; ky < f->h; ky++) {
            const int32_t iy = iy0 + ky;
            if (iy < 0 || iy >= in->h) {
                for (int32_t i = 0; i < run; i++)
                    *dst++ = pad;
                continue;
            }
            const int8_t *src = input + (iy * in->w + ix0 + kx0) * ci;
            for (int32_t i = 0; i < before; i++)
                *dst++ = pad;
            int32_t i = 0;
            for (; i + 4 <= valid; i += 4, dst += 4)
                tsr_st32(dst, tsr_ld32(src + i));
            for (; i < valid; i++)
                *dst++ = src[i];
            for (int32_t j = 0; j < after; j++)
                *dst++ = pad;
        }
        /* whole groups: the padding bytes past k convert to 0 as well */
        for (int32_t i = k; i & 3; i++)
            *dst++ = pad;
        col_put(col, P, 0, patch, (k + 3) & ~3, cp->input_offset);
        return;
    }
    int32_t kk = 0;
    for (int32_t ky = 0; ky < f->h; ky++) {
        int32_t iy = iy0 + ky;
        if (iy < 0 || iy >= in->h) {
            col_put(col, P, kk, NULL, run, 0);
            kk += run;
            continue;
        }
        for (int32_t kx = 0; kx < f->w; kx++, kk += ci) {
            if (kx < kx0 || kx >= kx1)
                col_put(col, P, kk, NULL, ci, 0);
            else
                col_put(col, P, kk, input + (iy * in->w + ix0 + kx) * ci, ci, cp->input_offset);
        }
    }
    col_pad(col, P, k);
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
    if (ctx == NULL || ctx->buf == NULL || ctx->size < cols_bytes(k, 2) || filter_dims->c != input_dims->c ||
        conv_params->dilation.w != 1 || conv_params->dilation.h != 1 ||
        (upscale_dims && (upscale_dims->h != 1 || upscale_dims->w != 1)))
        return ARM_CMSIS_NN_ARG_ERROR;
    const tsr_mm_t m = mm_params(conv_params, quant_params, filter_data, bias_data, k, output_dims->c);
    int32_t *cols = (int32_t *)ctx->buf;
    const int32_t pixels = output_dims->h * output_dims->w, ow = output_dims->w;
    const int32_t in_image = input_dims->h * input_dims->w * input_dims->c;
    const int32_t out_image = pixels * output_dims->c;
    const int32_t quads = ctx->size >= cols_bytes(k, 4);
    for (int32_t n = 0; n < input_dims->n; n++) {
        const int8_t *in = input_data + n * in_image;
        int8_t *out = output_data + n * out_image;
        int32_t p = 0;
        if (quads) {
            for (; p < pixels; p += 4) {
                const int32_t np = pixels - p < 4 ? pixels - p : 4;
                for (int32_t i = 0; i < np; i++)
                    im2col(cols, 4, i, conv_params, input_dims, in, filter_dims, (p + i) / ow, (p + i) % ow);
                mm_4px(&m, cols, out + p * m.co, np);
            }
            continue;
        }
        for (; p + 1 < pixels; p += 2) {
            im2col(cols, 2, 0, conv_params, input_dims, in, filter_dims, p / ow, p % ow);
            im2col(cols, 2, 1, conv_params, input_dims, in, filter_dims, (p + 1) / ow, (p + 1) % ow);
            mm_2px(&m, cols, out + p * m.co, out + (p + 1) * m.co);
        }
        if (p < pixels) {
            im2col(cols, 2, 0, conv_params, input_dims, in, filter_dims, p / ow, p % ow);
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
        conv_params->stride.h != 1 || ctx == NULL || ctx->buf == NULL || ctx->size < cols_bytes(ci, 2))
        return ARM_CMSIS_NN_ARG_ERROR;
    const tsr_mm_t m = mm_params(conv_params, quant_params, filter_data, bias_data, ci, output_dims->c);
    int32_t *cols = (int32_t *)ctx->buf;
    const int32_t pixels = input_dims->n * input_dims->h * input_dims->w, off = conv_params->input_offset;
    int32_t p = 0;
    if (ctx->size >= cols_bytes(ci, 4)) {
        for (; p < pixels; p += 4) {
            const int32_t np = pixels - p < 4 ? pixels - p : 4;
            for (int32_t i = 0; i < np; i++) {
                col_put(cols + 2 * i, 4, 0, input_data + (p + i) * ci, ci, off);
                col_pad(cols + 2 * i, 4, ci);
            }
            mm_4px(&m, cols, output_data + p * m.co, np);
        }
        return ARM_CMSIS_NN_SUCCESS;
    }
    for (; p + 1 < pixels; p += 2) {
        col_put(cols, 2, 0, input_data + p * ci, ci, off);
        col_put(cols + 2, 2, 0, input_data + (p + 1) * ci, ci, off);
        col_pad(cols, 2, ci);
        col_pad(cols + 2, 2, ci);
        mm_2px(&m, cols, output_data + p * m.co, output_data + (p + 1) * m.co);
    }
    if (p < pixels) {
        col_put(cols, 2, 0, input_data + p * ci, ci, off);
        col_pad(cols, 2, ci);
        mm_1px(&m, cols, output_data + p * m.co);
    }
    return ARM_CMSIS_NN_SUCCESS;
}
