/*
 * Depthwise core of the Cortex-M kernels (tsr_mm.h: tsr_dw), for every
 * requantization form (tsr_rq.h); CMSIS-NN's depthwise API (arm/depthwise.c)
 * and tessera's entry points call it. Written for tessera.
 *
 * Channels are the SIMD dimension: HWC input gives four neighbouring
 * channels in one word. One word is sign-extended (with input_offset) into
 * two int16 pairs, multiplied by the matching filter pairs with
 * smlabb/smlatt, four channels per tap. When the caller gives room for it
 * (wx: C * KH * KW int16), the filter is sign-extended once per call (and
 * doubled for TSR_RQ_TFL) instead of once per output pixel, and a 3x3
 * window inside the input runs as nine unrolled taps. Groups of four
 * channels are the outer loop, so their requantization constants are
 * worked out once. Windows are clipped to the input, so padded taps cost
 * nothing and contribute 0.
 *
 * A 3x3 filter at stride 1 with room for it runs on 16-bit planes instead
 * (below: dwp_*), band of rows by band of rows within each group.
 *
 * The loop order (groups of four channels outermost, each over every
 * output pixel in raster order, then the channels past the last group one
 * by one) is what tessera's in-place planning models
 * (planning/inplace.py). A layer run in place gets no room for the planes
 * (its scratch there is the filter and its sign-extended copy), so it keeps
 * that order; the planes' bands would be safe too, reading each input row no
 * later than the raster order does and writing in the same order.
 */
#include <stddef.h>

#include "tsr_mm.h"

typedef struct {
    const int8_t *in;
    int32_t in_h, in_w, c;
    const int8_t *w;          /* [kh][kw][c] */
    const int32_t *wx;        /* sign-extended filter, [c/4][kh*kw][2] words, or NULL */
    int32_t kh, kw, sh, sw, pt, pl;
    int32_t in_off;
    int8_t *out;
    int32_t out_h, out_w;
} tsr_dw_t;

/* the bias and requantization of four channels, worked out once per call */
typedef struct {
    int32_t bias[4];
    tsr_rqc_t rq[4];
    tsr_rqp_t q;              /* from the group's first channel (TSR_RQ_ANY) */
    int32_t dbl, lo, hi;
} tsr_dw_q4_t;

TSR_INLINE void dw_store4(int8_t *out, const tsr_dw_q4_t *q, const int32_t *acc, int mode, int full)
{
    if (mode == TSR_RQ_ANY) {
        for (int32_t i = 0; i < 4; i++)
            out[i] = tsr_rq_any(acc[i] >> q->dbl, &q->q, i);
        return;
    }
    out[0] = tsr_rq_clamp(tsr_rq_val(acc[0], q->rq[0], mode), q->lo, q->hi, full);
    out[1] = tsr_rq_clamp(tsr_rq_val(acc[1], q->rq[1], mode), q->lo, q->hi, full);
    out[2] = tsr_rq_clamp(tsr_rq_val(acc[2], q->rq[2], mode), q->lo, q->hi, full);
    out[3] = tsr_rq_clamp(tsr_rq_val(acc[3], q->rq[3], mode), q->lo, q->hi, full);
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
TSR_INLINE void dw_3x3(const int8_t *p, int32_t c, int32_t row, const int32_t *wg, int32_t off2, int32_t *acc)
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

/* A group's every output row through the unrolled taps: per row the
 * windows over the left border, those inside, those over the right border
 * (each with its filter: wf[row class][column class], windows moved
 * inside), `step` bytes apart, outputs `c` apart. Out of line, so that the
 * 13 registers of the unrolled taps are there for it; one copy per form and
 * clamp. */
typedef struct {
    int32_t c, row, step, off2;
    const tsr_dw_q4_t *q;
    const int32_t *wf[3][3];
    int32_t ox_lo, ox_hi;      /* output columns [0, ox_lo) hang over the left, [ox_hi, out_w) the right */
} tsr_dw_run_t;

TSR_INLINE void dw3x3_run(const int8_t *p, int8_t *o, int32_t n, const int32_t *wg, const tsr_dw_run_t *r, int mode,
                          int full)
{
    for (; n > 0; n--, p += r->step, o += r->c) {
        int32_t acc[4] = {r->q->bias[0], r->q->bias[1], r->q->bias[2], r->q->bias[3]};
        dw_3x3(p, r->c, r->row, wg, r->off2, acc);
        dw_store4(o, r->q, acc, mode, full);
    }
}

#define DW3X3_RUN(NAME, MODE, FULL)                                                                          \
    static __attribute__((noinline)) void NAME(const tsr_dw_t *d, int32_t ch, const tsr_dw_run_t *r)        \
    {                                                                                                       \
        const int32_t c = r->c, step = r->step, ox_lo = r->ox_lo, ox_hi = r->ox_hi;                         \
        for (int32_t oy = 0; oy < d->out_h; oy++) {                                                         \
            const int32_t iy = oy * d->sh - d->pt;                                                          \
            const int32_t a = iy < 0 ? 0 : iy + 3 > d->in_h ? 2 : 1;                                        \
            const int32_t sy = a == 0 ? 1 : a == 2 ? -1 : 0;                                                \
            const int8_t *p = d->in + ((iy + sy) * d->in_w - d->pl) * c + ch;                               \
            int8_t *out = d->out + oy * d->out_w * c + ch;                                                  \
            dw3x3_run(p + c, out, ox_lo, r->wf[a][0], r, MODE, FULL);                                       \
            dw3x3_run(p + ox_lo * step, out + ox_lo * c, ox_hi - ox_lo, r->wf[a][1], r, MODE, FULL);        \
            dw3x3_run(p + ox_hi * step - c, out + ox_hi * c, d->out_w - ox_hi, r->wf[a][2], r, MODE, FULL); \
        }                                                                                                   \
    }
/* The fast forms each template is made for (name suffix, form, int8's whole
 * range), in dw_form's order. */
#define DW_FORMS(T, P)                                                                                       \
    T(P##_hu_full, TSR_RQ_HU, 1)                                                                             \
    T(P##_hu, TSR_RQ_HU, 0)                                                                                  \
    T(P##_tfl_full, TSR_RQ_TFL, 1)                                                                           \
    T(P##_tfl, TSR_RQ_TFL, 0)                                                                                \
    T(P##_tflw, TSR_RQ_TFLW, 0)                                                                              \
    T(P##_k64, TSR_RQ_K64, 0)

static int dw_form(int mode, int full)
{
    return mode == TSR_RQ_HU ? !full : mode == TSR_RQ_TFL ? 2 + !full : mode == TSR_RQ_TFLW ? 4 : 5;
}

DW_FORMS(DW3X3_RUN, dw3x3)
#undef DW3X3_RUN

typedef void (*dw3x3_fn)(const tsr_dw_t *, int32_t, const tsr_dw_run_t *);

static dw3x3_fn dw3x3_pick(int mode, int full)
{
    static const dw3x3_fn fns[6] = {dw3x3_hu_full, dw3x3_hu, dw3x3_tfl_full, dw3x3_tfl, dw3x3_tflw, dw3x3_k64};
    return fns[dw_form(mode, full)];
}

/* The taps' way, window by window (any filter), one copy per form. */
#define DW_WINDOWS(NAME, MODE)                                                                              \
    static __attribute__((noinline)) void NAME(const tsr_dw_t *d, int32_t g, const tsr_dw_q4_t *q)          \
    {                                                                                                       \
        const int32_t c = d->c, ch = g * 4, step = d->sw * c;                                               \
        for (int32_t oy = 0; oy < d->out_h; oy++) {                                                         \
            const int32_t iy = oy * d->sh - d->pt;                                                          \
            const int32_t ky0 = iy < 0 ? -iy : 0;                                                           \
            const int32_t ky1 = iy + d->kh > d->in_h ? d->in_h - iy : d->kh;                                \
            int8_t *out = d->out + oy * d->out_w * c + ch;                                                  \
            const int8_t *p = d->in + (iy * d->in_w - d->pl) * c + ch;                                      \
            for (int32_t ox = 0; ox < d->out_w; ox++) {                                                     \
                const int32_t ix = ox * d->sw - d->pl;                                                      \
                const int32_t kx0 = ix < 0 ? -ix : 0;                                                       \
                const int32_t kx1 = ix + d->kw > d->in_w ? d->in_w - ix : d->kw;                            \
                int32_t acc[4] = {q->bias[0], q->bias[1], q->bias[2], q->bias[3]};                          \
                dw_taps(d, p + ox * step, g, ky0, ky1, kx0, kx1, acc);                                      \
                dw_store4(out + ox * c, q, acc, MODE, 0);                                                   \
            }                                                                                               \
        }                                                                                                   \
    }
DW_WINDOWS(dw_windows_hu, TSR_RQ_HU)
DW_WINDOWS(dw_windows_tfl, TSR_RQ_TFL)
DW_WINDOWS(dw_windows_tflw, TSR_RQ_TFLW)
DW_WINDOWS(dw_windows_k64, TSR_RQ_K64)
DW_WINDOWS(dw_windows_any, TSR_RQ_ANY)
#undef DW_WINDOWS

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
static void dw_group_pixels(const tsr_dw_t *d, int32_t g, const tsr_dw_q4_t *q, int mode, int full)
{
    const int32_t c = d->c, ch = g * 4;
    const int32_t step = d->sw * c, row = d->in_w * c;
    const int32_t over_b = (d->out_h - 1) * d->sh - d->pt + 3 - d->in_h;
    const int32_t over_r = (d->out_w - 1) * d->sw - d->pl + 3 - d->in_w;
    const int shifted = d->wx && d->kh == 3 && d->kw == 3 && d->in_h >= 3 && d->in_w >= 3 && d->pt <= 1 &&
                        d->pl <= 1 && over_b <= 1 && over_r <= 1;
    /* the per-element requantization (TSR_RQ_ANY) takes the taps' way: its
     * out-of-line call leaves the unrolled taps too few registers */
    if (!shifted || mode == TSR_RQ_ANY) {
        if (mode == TSR_RQ_HU)
            dw_windows_hu(d, g, q);
        else if (mode == TSR_RQ_TFL)
            dw_windows_tfl(d, g, q);
        else if (mode == TSR_RQ_TFLW)
            dw_windows_tflw(d, g, q);
        else if (mode == TSR_RQ_K64)
            dw_windows_k64(d, g, q);
        else
            dw_windows_any(d, g, q);
        return;
    }
    /* by [row class][column class]: top/inside/bottom x left/inside/right;
     * only the classes that occur are made, the inside one is wg itself */
    int32_t filters[3][3][18];
    tsr_dw_run_t run;
    const int32_t *wg = d->wx + g * 18;
    const int32_t rows[3] = {d->pt > 0, 1, over_b > 0}, cols[3] = {d->pl > 0, 1, over_r > 0};
    for (int32_t a = 0; a < 3; a++)
        for (int32_t b = 0; b < 3; b++) {
            run.wf[a][b] = wg;
            if ((a != 1 || b != 1) && rows[a] && cols[b]) {
                dw_shifted(filters[a][b], wg, a == 0 ? 1 : a == 2 ? -1 : 0, b == 0 ? 1 : b == 2 ? -1 : 0);
                run.wf[a][b] = filters[a][b];
            }
        }
    run.c = c;
    run.row = row;
    run.step = step;
    run.off2 = tsr_dup16(d->in_off);
    run.q = q;
    run.ox_lo = (d->pl + d->sw - 1) / d->sw;
    run.ox_hi = (d->in_w + d->pl - 3) / d->sw + 1;
    run.ox_lo = run.ox_lo > d->out_w ? d->out_w : run.ox_lo;
    run.ox_hi = run.ox_hi > d->out_w ? d->out_w : run.ox_hi < run.ox_lo ? run.ox_lo : run.ox_hi;
    dw3x3_pick(mode, full)(d, ch, &run);
}

/*
 * 16-bit planes (a 3x3 filter at stride 1, any padding). Per group of
 * four channels and band of output rows, the input rows the band reads are
 * widened once into one int16 plane per channel, input_offset added and
 * the padding stored as zeros, so every window is inside its plane and the
 * border windows run the interior's loop. A plane word holds two
 * neighbouring columns of one channel: two taps per smlad. Two outputs of
 * a channel at once: out(x) = smlad(x01, w01) + smlabt(x23, w12),
 * out(x + 1) = smlatb(x01, w01) + smlad(x23, w12), per filter row
 * (w01 = (w0, w1), w12 = (w1, w2)): two ldrd and four MACs per row and
 * pair, 28 instructions a pair with the bias and the loop, against eight
 * loads and sign extensions and eight MACs per tap of four channels on
 * bytes. A band's accumulators are stored, then requantized in one loop:
 * the taps' loop keeps its 12 registers. Scratch past the sign-extended
 * filter (library.yaml: `planes`): 40 words of filter pairs, biases and
 * loop steps, the band's planes, its accumulators.
 */
/* the pair of 16-bit lanes (lo, hi) */
TSR_INLINE uint32_t dwp_pack(int32_t lo, int32_t hi)
{
    return ((uint32_t)lo & 0xffffu) | ((uint32_t)hi << 16);
}

/* a word's low and high 16-bit lanes */
TSR_INLINE int32_t dwp_lo(int32_t w)
{
    return (int16_t)(uint16_t)(uint32_t)w;
}

TSR_INLINE int32_t dwp_hi(int32_t w)
{
    return (int16_t)((uint32_t)w >> 16);
}

/* Plane geometry of one call: row width rw (halfwords, even), the band's
 * output rows `rows`, its input rows and one plane's halfwords; 0 rows when
 * three input rows do not fit. After the planes, the band's accumulators
 * (rows * out_w + 1 words). */
typedef struct {
    int32_t rw, rows, in_rows, ps;
} dwp_geom_t;

static int32_t dwp_bytes(const tsr_dw_t *d, int32_t rw, int32_t rows)
{
    return 4 * 2 * rw * ((rows - 1) * d->sh + 3) + 4 * (rows * d->out_w + 1);
}

static dwp_geom_t dwp_geom(const tsr_dw_t *d, int32_t room)
{
    dwp_geom_t g = {0, 0, 0, 0};
    /* columns read (stride 1): four from each pair's first output, four
     * from a lone last one */
    int32_t cols = ((d->out_w - 1) & ~1) + 4;
    if (cols < d->pl + d->in_w)
        cols = d->pl + d->in_w;
    g.rw = (cols + 1) & ~1;
    room -= 4 * 40;
    if (room < dwp_bytes(d, g.rw, 1))
        return g;
    int32_t rows = 1;
    while (rows < d->out_h && dwp_bytes(d, g.rw, rows + 1) <= room)
        rows++;
    g.rows = rows;
    g.in_rows = (rows - 1) * d->sh + 3;
    g.ps = g.in_rows * g.rw;
    return g;
}

#if TSR_DW_ASM
/* k pairs of pixels from x on (pixel stride c), four channels each, into
 * the planes' words at p0 (channels 0, 1: ps halfwords apart) and p2
 * (channels 2, 3) */
TSR_INLINE void dwp_pairs(const int8_t *x, int32_t c, int16_t *p0, int16_t *p2, int32_t ps, int32_t off2, int32_t k)
{
    int32_t va, vb, a02, b02, t;
    __asm__ volatile("1:\n\t"
                     "ldr %[va], [%[x]]\n\t"
                     "ldr %[vb], [%[x], %[c]]\n\t"
                     "add %[x], %[x], %[c], lsl #1\n\t"
                     "sxtab16 %[a02], %[off2], %[va]\n\t"
                     "sxtab16 %[va], %[off2], %[va], ror #8\n\t"
                     "sxtab16 %[b02], %[off2], %[vb]\n\t"
                     "sxtab16 %[vb], %[off2], %[vb], ror #8\n\t"
                     "pkhbt %[t], %[a02], %[b02], lsl #16\n\t"
                     "pkhtb %[b02], %[b02], %[a02], asr #16\n\t"
                     "pkhbt %[a02], %[va], %[vb], lsl #16\n\t"
                     "pkhtb %[vb], %[vb], %[va], asr #16\n\t"
                     "str %[a02], [%[p0], %[ps2]]\n\t"
                     "str %[t], [%[p0]], #4\n\t"
                     "str %[vb], [%[p2], %[ps2]]\n\t"
                     "str %[b02], [%[p2]], #4\n\t"
                     "subs %[k], %[k], #1\n\t"
                     "bne 1b\n\t"
                     : [x] "+&r"(x), [p0] "+&r"(p0), [p2] "+&r"(p2), [k] "+&r"(k), [va] "=&r"(va),
                       [vb] "=&r"(vb), [a02] "=&r"(a02), [b02] "=&r"(b02), [t] "=&r"(t)
                     : [c] "r"(c), [ps2] "r"(2 * ps), [off2] "r"(off2)
                     : "cc", "memory");
}
#endif

/* Input columns [0, n) of one row, four channels from src (pixel stride c),
 * into four plane rows ps halfwords apart from column `col` on. */
static __attribute__((noinline)) void dwp_widen(const int8_t *src, int32_t c, int32_t n, int16_t *dst, int32_t ps, int32_t off2, int32_t col)
{
    int16_t *d0 = dst + col;
    int32_t i = 0;
    /* a lone first column, so that the pairs' words are aligned */
    if (col & 1 && n > 0) {
        const uint32_t v = tsr_ld32(src);
        const int32_t x02 = tsr_sxtab16(off2, v), x13 = tsr_sxtab16_ror8(off2, v);
        d0[0] = (int16_t)x02;
        d0[ps] = (int16_t)x13;
        d0[2 * ps] = (int16_t)(x02 >> 16);
        d0[3 * ps] = (int16_t)(x13 >> 16);
        i = 1;
    }
#if TSR_DW_ASM
    if (n - i >= 2) {
        /* pairs of pixels: four channels each, one word per channel's plane */
        dwp_pairs(src + i * c, c, d0 + i, d0 + i + 2 * ps, ps, off2, (n - i) >> 1);
        i += (n - i) & ~1;
    }
#endif
    for (; i + 1 < n; i += 2) {
        const uint32_t va = tsr_ld32(src + i * c), vb = tsr_ld32(src + (i + 1) * c);
        const int32_t a02 = tsr_sxtab16(off2, va), a13 = tsr_sxtab16_ror8(off2, va);
        const int32_t b02 = tsr_sxtab16(off2, vb), b13 = tsr_sxtab16_ror8(off2, vb);
        uint32_t *w = (uint32_t *)(void *)(d0 + i);
        w[0] = ((uint32_t)a02 & 0xffffu) | ((uint32_t)b02 << 16);
        w[ps / 2] = ((uint32_t)a13 & 0xffffu) | ((uint32_t)b13 << 16);
        w[ps] = ((uint32_t)b02 & 0xffff0000u) | ((uint32_t)a02 >> 16);
        w[3 * ps / 2] = ((uint32_t)b13 & 0xffff0000u) | ((uint32_t)a13 >> 16);
    }
    if (i < n) {
        const uint32_t v = tsr_ld32(src + i * c);
        const int32_t x02 = tsr_sxtab16(off2, v), x13 = tsr_sxtab16_ror8(off2, v);
        d0[i] = (int16_t)x02;
        d0[ps + i] = (int16_t)x13;
        d0[2 * ps + i] = (int16_t)(x02 >> 16);
        d0[3 * ps + i] = (int16_t)(x13 >> 16);
    }
}

/* Input rows of the band, `rows` of them from src on (row stride sstep
 * bytes), into plane rows rw halfwords apart from dst + col on: a lone first
 * column (odd col), then an even n - (col & 1) pixels in pairs, one
 * assembly block a row and no call: per row the calls and the lone
 * column's C cost more than its pairs. */
static void dwp_widen_rows(const int8_t *src, int32_t sstep, int32_t c, int32_t n, int16_t *dst, int32_t rw,
                           int32_t ps, int32_t off2, int32_t col, int32_t rows)
{
#if TSR_DW_ASM
    const int32_t lone = col & 1, pairs = (n - lone) >> 1;
    if (pairs > 0 && !((n - lone) & 1)) {
        for (int32_t r = 0; r < rows; r++, src += sstep, dst += rw) {
            const int8_t *x = src;
            int16_t *p0 = dst + col, *p2 = dst + col + 2 * ps;
            int32_t va, a02;
            if (lone)
                __asm__ volatile("ldr %[va], [%[x]]\n\t"
                                 "add %[x], %[x], %[c]\n\t"
                                 "sxtab16 %[a02], %[off2], %[va]\n\t"
                                 "sxtab16 %[va], %[off2], %[va], ror #8\n\t"
                                 "strh %[va], [%[p0], %[ps2]]\n\t"
                                 "strh %[a02], [%[p0]], #2\n\t"
                                 "asr %[a02], %[a02], #16\n\t"
                                 "asr %[va], %[va], #16\n\t"
                                 "strh %[va], [%[p2], %[ps2]]\n\t"
                                 "strh %[a02], [%[p2]], #2\n\t"
                                 : [x] "+&r"(x), [p0] "+&r"(p0), [p2] "+&r"(p2), [va] "=&r"(va), [a02] "=&r"(a02)
                                 : [c] "r"(c), [ps2] "r"(2 * ps), [off2] "r"(off2)
                                 : "memory");
            dwp_pairs(x, c, p0, p2, ps, off2, pairs);
        }
        return;
    }
#endif
    for (int32_t r = 0; r < rows; r++, src += sstep, dst += rw)
        dwp_widen(src, c, n, dst, ps, off2, col);
}

/* One band's planes: output rows from oy0 read input rows from
 * oy0 * sh - pt; rows outside the input are zeros. The border columns
 * were zeroed once per call. */
static __attribute__((noinline)) void dwp_fill(const tsr_dw_t *d, int16_t *pl, const dwp_geom_t *g, int32_t ch, int32_t oy0, int32_t rows)
{
    const int32_t iy0 = oy0 * d->sh - d->pt, in_rows = (rows - 1) * d->sh + 3, off2 = tsr_dup16(d->in_off);
    const int32_t n = d->in_w < g->rw - d->pl ? d->in_w : g->rw - d->pl;
    /* the rows inside the input, [r0, r1), widened in one run */
    const int32_t r0 = iy0 < 0 ? -iy0 : 0;
    int32_t r1 = d->in_h - iy0 < in_rows ? d->in_h - iy0 : in_rows;
    if (r1 < r0)
        r1 = r0;
    for (int32_t r = 0; r < in_rows; r++) {
        if (r == r0 && r1 > r0) {
            dwp_widen_rows(d->in + (iy0 + r0) * d->in_w * d->c + ch, d->in_w * d->c, d->c, n, pl + r0 * g->rw,
                           g->rw, g->ps, off2, d->pl, r1 - r0);
            r = r1 - 1;
            continue;
        }
        int16_t *row = pl + r * g->rw;
        for (int32_t k = 0; k < 4; k++)
            for (int32_t x = d->pl; x < d->pl + n; x++)
                row[k * g->ps + x] = 0;
    }
}

/* the border columns of every plane row: zero, once per call */
static void dwp_borders(const tsr_dw_t *d, int16_t *pl, const dwp_geom_t *g)
{
    const int32_t n = d->in_w < g->rw - d->pl ? d->in_w : g->rw - d->pl;
    for (int32_t r = 0; r < 4 * g->in_rows; r++) {
        int16_t *row = pl + r * g->rw;
        for (int32_t x = 0; x < d->pl; x++)
            row[x] = 0;
        for (int32_t x = d->pl + n; x < g->rw; x++)
            row[x] = 0;
    }
}

/* One band of one channel: its plane, filter pairs wf (three rows of
 * (w01, w12), then the bias), the outputs of `rows` rows from out (pixel
 * stride c), acc: the band's accumulators. */
typedef struct {
    const int16_t *plane;
    const int32_t *wf;
    int8_t *out;
    int32_t *acc;
    int32_t rows, rw, out_w, c;
    tsr_rqc_t rq;
} dwp_band_t;

#if TSR_DW_ASM
#define DWP_ROW(X, WOFF)                                       \
    "ldrd %[x0], %[x1], [" X "]\n\t"                           \
    "ldrd %[w0], %[w1], [%[wf], #" WOFF "]\n\t"                \
    "smlad %[a0], %[x0], %[w0], %[a0]\n\t"                     \
    "smlabt %[a0], %[x1], %[w1], %[a0]\n\t"                    \
    "smlatb %[a1], %[x0], %[w0], %[a1]\n\t"                    \
    "smlad %[a1], %[x1], %[w1], %[a1]\n\t"
/* one plane row (at p) of four outputs: x01 and x23, then x45 in x0;
 * filter row (w01, w12) at WOFF */
#define DWP_QUAD(WOFF)                                         \
    "ldrd %[x0], %[x1], [%[p]]\n\t"                           \
    "ldrd %[w0], %[w1], [%[wf], #" WOFF "]\n\t"                \
    "smlad %[a0], %[x0], %[w0], %[a0]\n\t"                     \
    "smlatb %[a1], %[x0], %[w0], %[a1]\n\t"                    \
    "smlad %[a2], %[x1], %[w0], %[a2]\n\t"                     \
    "smlatb %[a3], %[x1], %[w0], %[a3]\n\t"                    \
    "smlabt %[a0], %[x1], %[w1], %[a0]\n\t"                    \
    "smlad %[a1], %[x1], %[w1], %[a1]\n\t"                     \
    "ldr %[x0], [%[p], #8]\n\t"                                \
    "smlabt %[a2], %[x0], %[w1], %[a2]\n\t"                    \
    "smlad %[a3], %[x0], %[w1], %[a3]\n\t"
/* one input row X of a lone column's two outputs: a1 (the lower one) with
 * filter row w0/w1 as loaded, then a0 with filter row WOFF (loaded) */
#define DWP_COL(X, WOFF)                                       \
    "ldrd %[x0], %[x1], [" X "]\n\t"                           \
    "smlad %[a1], %[x0], %[w0], %[a1]\n\t"                     \
    "smlabt %[a1], %[x1], %[w1], %[a1]\n\t"                    \
    "ldrd %[w0], %[w1], [%[wf], #" WOFF "]\n\t"                \
    "smlad %[a0], %[x0], %[w0], %[a0]\n\t"                     \
    "smlabt %[a0], %[x1], %[w1], %[a0]\n\t"
#endif

/* The accumulators of `rows` rows of out_w outputs from the window at p on
 * (row: the plane's row stride in bytes) into acc, rows apart by out_w. wf:
 * a channel's six filter pairs, its bias, the pairs per row (out_w / 2),
 * the bytes from a row's last pair to the next row's first, the
 * accumulators' bytes to skip at a row's end (a lone last output). Pairs
 * of neighbouring outputs along each row, then a lone last column (odd
 * out_w) in pairs down the column: six input rows' words for two outputs
 * where row pairs would take eight. */
static void dwp_rows(const int16_t *p, int32_t row, const int32_t *wf, int32_t *acc, int32_t rows, int32_t out_w)
{
    const int32_t last = out_w - 1;
#if TSR_DW_ASM
    const int16_t *t;
    int32_t n, a0, a1, x0, x1, w0, w1;
    if (out_w >= 4 && !(out_w & 2)) {
        /* quads of neighbouring outputs (out_w % 4 < 2): three words of
         * a plane row for four outputs, 45 instructions a quad where two
         * pairs take 56 */
        const int16_t *q = p;
        int32_t *o = acc;
        int32_t a2, a3;
        for (int32_t r = 0; r < rows; r++) {
            n = wf[7] >> 1;
            __asm__ volatile("1:\n\t"
                             "ldr %[a0], [%[wf], #24]\n\t"
                             "mov %[a1], %[a0]\n\t"
                             "mov %[a2], %[a0]\n\t"
                             "mov %[a3], %[a0]\n\t" DWP_QUAD("0") "add %[p], %[p], %[row]\n\t" DWP_QUAD("8")
                             "add %[p], %[p], %[row]\n\t" DWP_QUAD("16")
                             "sub %[p], %[p], %[row], lsl #1\n\t"
                             "add %[p], %[p], #8\n\t"
                             "strd %[a2], %[a3], [%[acc], #8]\n\t"
                             "strd %[a0], %[a1], [%[acc]], #16\n\t"
                             "subs %[n], %[n], #1\n\t"
                             "bne 1b\n\t"
                             : [p] "+&r"(q), [acc] "+&r"(o), [n] "+&r"(n), [a0] "=&r"(a0), [a1] "=&r"(a1),
                               [a2] "=&r"(a2), [a3] "=&r"(a3), [x0] "=&r"(x0), [x1] "=&r"(x1), [w0] "=&r"(w0),
                               [w1] "=&r"(w1)
                             : [row] "r"(row), [wf] "r"(wf)
                             : "cc", "memory");
            q = (const int16_t *)(const void *)((const int8_t *)q + wf[8]);
            o = (int32_t *)(void *)((int8_t *)o + wf[9]);
        }
    } else if (wf[7] > 0) {
        const int16_t *q = p;
        int32_t *o = acc, r = rows;
        __asm__ volatile("2:\n\t"
                         "ldr %[n], [%[wf], #28]\n\t"
                         "1:\n\t"
                         "ldr %[a0], [%[wf], #24]\n\t"
                         "mov %[a1], %[a0]\n\t" DWP_ROW("%[p]", "0") "add %[t], %[p], %[row]\n\t"
                         DWP_ROW("%[t]", "8") "add %[t], %[t], %[row]\n\t" DWP_ROW("%[t]", "16")
                         "add %[p], %[p], #4\n\t"
                         "strd %[a0], %[a1], [%[acc]], #8\n\t"
                         "subs %[n], %[n], #1\n\t"
                         "bne 1b\n\t"
                         "ldrd %[t], %[n], [%[wf], #32]\n\t"
                         "add %[p], %[p], %[t]\n\t"
                         "add %[acc], %[acc], %[n]\n\t"
                         "subs %[rows], %[rows], #1\n\t"
                         "bne 2b\n\t"
                         : [p] "+&r"(q), [acc] "+&r"(o), [rows] "+&r"(r), [n] "=&r"(n), [t] "=&r"(t),
                           [a0] "=&r"(a0), [a1] "=&r"(a1), [x0] "=&r"(x0), [x1] "=&r"(x1), [w0] "=&r"(w0),
                           [w1] "=&r"(w1)
                         : [row] "r"(row), [wf] "r"(wf)
                         : "cc", "memory");
    }
    if (!(out_w & 1))
        return;
    p += last;
    acc += last;
    if (rows >> 1) {
        const int32_t ostep = out_w * 4;
        n = rows >> 1;
        __asm__ volatile("1:\n\t"
                         "ldr %[a0], [%[wf], #24]\n\t"
                         "mov %[a1], %[a0]\n\t"
                         "ldrd %[x0], %[x1], [%[p]]\n\t"
                         "ldrd %[w0], %[w1], [%[wf]]\n\t"
                         "smlad %[a0], %[x0], %[w0], %[a0]\n\t"
                         "smlabt %[a0], %[x1], %[w1], %[a0]\n\t"
                         "add %[t], %[p], %[row]\n\t" DWP_COL("%[t]", "8")
                         "add %[t], %[t], %[row]\n\t" DWP_COL("%[t]", "16")
                         "add %[t], %[t], %[row]\n\t"
                         "ldrd %[x0], %[x1], [%[t]]\n\t"
                         "smlad %[a1], %[x0], %[w0], %[a1]\n\t"
                         "smlabt %[a1], %[x1], %[w1], %[a1]\n\t"
                         "sub %[p], %[t], %[row]\n\t"
                         "str %[a1], [%[acc], %[ostep]]\n\t"
                         "str %[a0], [%[acc]]\n\t"
                         "add %[acc], %[acc], %[ostep], lsl #1\n\t"
                         "subs %[n], %[n], #1\n\t"
                         "bne 1b\n\t"
                         : [p] "+&r"(p), [acc] "+&r"(acc), [n] "+&r"(n), [t] "=&r"(t), [a0] "=&r"(a0),
                           [a1] "=&r"(a1), [x0] "=&r"(x0), [x1] "=&r"(x1), [w0] "=&r"(w0), [w1] "=&r"(w1)
                         : [row] "r"(row), [wf] "r"(wf), [ostep] "r"(ostep)
                         : "cc", "memory");
    }
    if (rows & 1) {
        /* the last row's lone output */
        int32_t a = wf[6];
        for (int32_t ky = 0; ky < 3; ky++) {
            const int16_t *x = (const int16_t *)(const void *)((const int8_t *)p + ky * row);
            a += x[0] * dwp_lo(wf[2 * ky]) + x[1] * dwp_hi(wf[2 * ky]) + x[2] * dwp_hi(wf[2 * ky + 1]);
        }
        *acc = a;
    }
#else
    for (int32_t r = 0; r < rows; r++, p = (const int16_t *)(const void *)((const int8_t *)p + row))
        for (int32_t x = 0; x < out_w; x++) {
            int32_t a = wf[6];
            for (int32_t ky = 0; ky < 3; ky++) {
                const int16_t *v = (const int16_t *)(const void *)((const int8_t *)p + ky * row) + x;
                a += v[0] * dwp_lo(wf[2 * ky]) + v[1] * dwp_hi(wf[2 * ky]) + v[2] * dwp_hi(wf[2 * ky + 1]);
            }
            acc[r * out_w + x] = a;
        }
    (void)last;
#endif
}

/* HU with the full int8 range, four accumulators from *pacc at a time
 * (smmla, asr, ssat, strb each: 22 instructions for four values, against
 * 30 as GCC writes the pairs' loop); the outputs c bytes apart from *po
 * on. Returns the values left (n % 4), the pointers moved past the rest. */
TSR_INLINE int32_t dwp_rq_hu4(const int32_t **pacc, int8_t **po, int32_t n, tsr_rqc_t rq, int32_t c)
{
#if TSR_DW_ASM
    int32_t k = n >> 2;
    if (k) {
        const int32_t *acc = *pacc;
        int8_t *o = *po;
        int32_t v0, v1, v2, v3;
        __asm__ volatile("1:\n\t"
                         "ldrd %[v0], %[v1], [%[acc]], #8\n\t"
                         "ldrd %[v2], %[v3], [%[acc]], #8\n\t"
                         "smmla %[v0], %[v0], %[m], %[h]\n\t"
                         "smmla %[v1], %[v1], %[m], %[h]\n\t"
                         "smmla %[v2], %[v2], %[m], %[h]\n\t"
                         "smmla %[v3], %[v3], %[m], %[h]\n\t"
                         "asr %[v0], %[v0], %[sh]\n\t"
                         "asr %[v1], %[v1], %[sh]\n\t"
                         "asr %[v2], %[v2], %[sh]\n\t"
                         "asr %[v3], %[v3], %[sh]\n\t"
                         "ssat %[v0], #8, %[v0]\n\t"
                         "ssat %[v1], #8, %[v1]\n\t"
                         "ssat %[v2], #8, %[v2]\n\t"
                         "ssat %[v3], #8, %[v3]\n\t"
                         "strb %[v0], [%[o]]\n\t"
                         "strb %[v1], [%[o], %[c]]\n\t"
                         "add %[o], %[o], %[c], lsl #1\n\t"
                         "strb %[v2], [%[o]]\n\t"
                         "strb %[v3], [%[o], %[c]]\n\t"
                         "add %[o], %[o], %[c], lsl #1\n\t"
                         "subs %[k], %[k], #1\n\t"
                         "bne 1b\n\t"
                         : [acc] "+&r"(acc), [o] "+&r"(o), [k] "+&r"(k), [v0] "=&r"(v0), [v1] "=&r"(v1),
                           [v2] "=&r"(v2), [v3] "=&r"(v3)
                         : [m] "r"(rq.m), [h] "r"(rq.h), [sh] "r"(rq.sh), [c] "r"(c)
                         : "cc", "memory");
        *pacc = acc;
        *po = o;
    }
    return n & 3;
#else
    (void)pacc;
    (void)po;
    (void)rq;
    (void)c;
    return n;
#endif
}

/* A band of one channel: its accumulators, then every output requantized
 * in one loop, two at a time (four in assembly for HU at full range). */
#define DWP_BAND(NAME, MODE, FULL)                                                                          \
    static __attribute__((noinline)) void NAME(const dwp_band_t *b, int32_t lo, int32_t hi)                  \
    {                                                                                                       \
        dwp_rows(b->plane, b->rw * 2, b->wf, b->acc, b->rows, b->out_w);                                    \
        const tsr_rqc_t rq = b->rq;                                                                         \
        const int32_t *acc = b->acc, c = b->c;                                                              \
        int8_t *o = b->out;                                                                                 \
        int32_t n = b->rows * b->out_w;                                                                     \
        if (MODE == TSR_RQ_HU && FULL)                                                                      \
            n = dwp_rq_hu4(&acc, &o, n, rq, c);                                                             \
        for (; n > 1; n -= 2, o += 2 * c, acc += 2) {                                                       \
            const int32_t v0 = acc[0], v1 = acc[1];                                                         \
            o[0] = tsr_rq_clamp(tsr_rq_val(v0, rq, MODE), lo, hi, FULL);                                    \
            o[c] = tsr_rq_clamp(tsr_rq_val(v1, rq, MODE), lo, hi, FULL);                                    \
        }                                                                                                   \
        if (n)                                                                                              \
            o[0] = tsr_rq_clamp(tsr_rq_val(acc[0], rq, MODE), lo, hi, FULL);                                \
    }
DW_FORMS(DWP_BAND, dwp)
#undef DWP_BAND

typedef void (*dwp_fn)(const dwp_band_t *, int32_t, int32_t);

static dwp_fn dwp_pick(int mode, int full)
{
    static const dwp_fn fns[6] = {dwp_hu_full, dwp_hu, dwp_tfl_full, dwp_tfl, dwp_tflw, dwp_k64};
    return fns[dw_form(mode, full)];
}

/* Group g (channels [4g, 4g + 4)) band by band; wf: room for four
 * channels' filter pairs, bias and loop steps (40 words), then the planes
 * pl, then the * band's accumulators. */
static void dwp_group(const tsr_dw_t *d, int32_t g, const tsr_dw_q4_t *q, int mode, int full, const dwp_geom_t *pg,
                      int32_t *wf, int16_t *pl, const int8_t *w)
{
    const int32_t c = d->c, ch = g * 4;
    for (int32_t k = 0; k < 4; k++) {
        for (int32_t ky = 0; ky < 3; ky++) {
            int32_t t[3];
            for (int32_t kx = 0; kx < 3; kx++)
                t[kx] = w[(ky * 3 + kx) * c + ch + k] * (1 + q->dbl);
            wf[k * 10 + ky * 2] = (int32_t)dwp_pack(t[0], t[1]);
            wf[k * 10 + ky * 2 + 1] = (int32_t)dwp_pack(t[1], t[2]);
        }
        wf[k * 10 + 6] = q->bias[k];
        wf[k * 10 + 7] = d->out_w >> 1;
        wf[k * 10 + 8] = 2 * (pg->rw - wf[k * 10 + 7] * 2);
        wf[k * 10 + 9] = (d->out_w & 1) * 4;
    }
    const dwp_fn run = dwp_pick(mode, full);
    dwp_band_t b;
    b.rw = pg->rw;
    b.out_w = d->out_w;
    b.c = c;
    b.acc = (int32_t *)(void *)(pl + 4 * pg->ps);
    for (int32_t oy0 = 0; oy0 < d->out_h; oy0 += pg->rows) {
        const int32_t rows = d->out_h - oy0 < pg->rows ? d->out_h - oy0 : pg->rows;
        dwp_fill(d, pl, pg, ch, oy0, rows);
        b.rows = rows;
        for (int32_t k = 0; k < 4; k++) {
            b.plane = pl + k * pg->ps;
            b.wf = wf + k * 10;
            b.out = d->out + oy0 * d->out_w * c + ch + k;
            b.rq = q->rq[k];
            run(&b, q->lo, q->hi);
        }
    }
}

/* A channel past the last group of four, every output pixel. */
static void dw_channel(const tsr_dw_t *d, int32_t ch, const tsr_rqp_t *q, int32_t bias, int32_t dbl, int mode)
{
    const int32_t c = d->c;
    const tsr_rqc_t r = mode == TSR_RQ_ANY ? (tsr_rqc_t){0, 0, 0, 0, 0} : tsr_rqc(q, ch, mode);
    for (int32_t oy = 0; oy < d->out_h; oy++)
        for (int32_t ox = 0; ox < d->out_w; ox++) {
            int32_t acc = bias;
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
            int8_t *o = d->out + (oy * d->out_w + ox) * c + ch;
            if (mode == TSR_RQ_ANY)
                *o = tsr_rq_any(acc, q, ch);
            else
                *o = tsr_rq_clamp(tsr_rq_val(tsr_shl(acc, dbl), r, mode), q->lo, q->hi, 0);
        }
}

/* Every group of four channels on planes (a 3x3 filter at stride 1 whose
 * band of rows fits past wx, every group in a fast form): 0 when not (at
 * stride 2 the planes measured slower: twice the input widened per output). */
static __attribute__((noinline)) int dwp_groups(const tsr_dwk_t *k, const tsr_dw_t *d, int mode, int32_t dbl,
                                                int32_t wx_bytes)
{
    const int32_t groups = k->c >> 2;
    if (d->kh != 3 || d->kw != 3 || d->sh != 1 || d->sw != 1 || groups == 0 || mode == TSR_RQ_ANY)
        return 0;
    const dwp_geom_t pg = dwp_geom(d, k->room - wx_bytes);
    if (pg.rows == 0)
        return 0;
    tsr_dw_q4_t q[1];
    for (int32_t g = 0; g < groups; g++) {
        const tsr_rqp_t p = tsr_rqp_at(k->q, g * 4);
        if (!tsr_rq_fast(&p, mode, 4))
            return 0;
    }
    int32_t *wf = (int32_t *)(void *)((int8_t *)k->wx + wx_bytes);
    int16_t *pl = (int16_t *)(void *)(wf + 40);
    const int full = k->q.lo == -128 && k->q.hi == 127;
    dwp_borders(d, pl, &pg);
    for (int32_t g = 0; g < groups; g++) {
        q->q = tsr_rqp_at(k->q, g * 4);
        q->dbl = dbl;
        q->lo = k->q.lo;
        q->hi = k->q.hi;
        for (int32_t i = 0; i < 4; i++) {
            q->bias[i] = k->bias ? tsr_shl(k->bias[g * 4 + i], dbl) : 0;
            q->rq[i] = tsr_rqc(&q->q, i, mode);
        }
        dwp_group(d, g, q, mode, full, &pg, wf, pl, k->w);
    }
    return 1;
}

/* The byte path over groups [g0, c/4) and the channels past them, the
 * filter sign-extended first when `prep`; out of line so that its large
 * frame is not on the stack while the planes run (stm32f4's 3 kB stack). */
static __attribute__((noinline)) void dw_bytes(const tsr_dwk_t *k, tsr_dw_t *d, int mode, int32_t dbl, int32_t g0,
                                               int prep)
{
    const int32_t c = k->c, taps = k->g.kh * k->g.kw, groups = c >> 2;
    if (prep && k->wx && groups > 0) {
        /* sign-extend the filter once, each group's taps together:
         * [group][tap] -> (w0, w2), (w1, w3), doubled for doubled accumulators */
        int32_t *wx = k->wx;
        for (int32_t g = 0; g < groups; g++)
            for (int32_t t = 0; t < taps; t++) {
                const uint32_t w = tsr_ld32(k->w + t * c + g * 4);
                int32_t a = tsr_sxtb16(w), b = tsr_sxtb16_ror8(w);
                if (dbl) {
                    a = tsr_sadd16(a, a);
                    b = tsr_sadd16(b, b);
                }
                wx[(g * taps + t) * 2] = a;
                wx[(g * taps + t) * 2 + 1] = b;
            }
        d->wx = wx;
    }
    const int full = k->q.lo == -128 && k->q.hi == 127;
    for (int32_t g = g0; g < groups; g++) {
        tsr_dw_q4_t q;
        q.q = tsr_rqp_at(k->q, g * 4);
        q.dbl = dbl;
        q.lo = k->q.lo;
        q.hi = k->q.hi;
        const int m = tsr_rq_fast(&q.q, mode, 4) ? mode : TSR_RQ_ANY;
        for (int32_t i = 0; i < 4; i++) {
            q.bias[i] = k->bias ? tsr_shl(k->bias[g * 4 + i], dbl) : 0;
            if (m != TSR_RQ_ANY)
                q.rq[i] = tsr_rqc(&q.q, i, m);
        }
        dw_group_pixels(d, g, &q, m, full);
    }
    for (int32_t ch = groups * 4; ch < c; ch++) {
        const tsr_rqp_t q = tsr_rqp_at(k->q, ch);
        const int m = tsr_rq_fast(&q, mode, 1) ? mode : TSR_RQ_ANY;
        dw_channel(d, ch, &k->q, k->bias ? k->bias[ch] : 0, dbl, m);
    }
}

void tsr_dw(const tsr_dwk_t *k, int mode)
{
    const int32_t c = k->c, taps = k->g.kh * k->g.kw, groups = c >> 2;
    tsr_dw_t d;
    /* TFL doubles the accumulators through the sign-extended filter */
    if (mode == TSR_RQ_TFL)
        mode = k->wx ? tsr_rq_mode(&k->q, mode, c, k->bias, tsr_mac_bound(taps, k->g.in_off)) : TSR_RQ_ANY;
    const int32_t dbl = mode == TSR_RQ_TFL || mode == TSR_RQ_TFLW;
    d.in = k->g.in;
    d.in_h = k->g.in_h;
    d.in_w = k->g.in_w;
    d.c = c;
    d.w = k->w;
    d.wx = NULL;
    d.kh = k->g.kh;
    d.kw = k->g.kw;
    d.sh = k->g.sh;
    d.sw = k->g.sw;
    d.pt = k->g.pt;
    d.pl = k->g.pl;
    d.in_off = k->g.in_off;
    d.out = k->g.out;
    d.out_h = k->g.out_h;
    d.out_w = k->g.out_w;
    /* planes where there is room past wx (none for a layer run in place) */
    const int32_t wx_bytes = (2 * taps * c + 3) & ~3;
    int32_t g0 = 0;
    if (k->wx && k->room - wx_bytes > 4 * 40 && dwp_groups(k, &d, mode, dbl, wx_bytes))
        g0 = groups;
    if (g0 < groups || groups * 4 < c)
        dw_bytes(k, &d, mode, dbl, g0, g0 == 0);
}
