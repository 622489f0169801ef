/*
 * Convolution, pointwise and fully connected cores of the Cortex-M kernels
 * (tsr_mm.h), for every requantization form (tsr_rq.h). Written for
 * tessera; CMSIS-NN's API (arm/convolve.c, fully_connected.c) and tessera's
 * entry points (glue.c, any_rq.c) call them.
 *
 * Convolutions and pointwise layers turn output pixels into int16 columns
 * (input plus input_offset, doubled for TSR_RQ_TFL, zero where the window
 * hangs over the padding) and multiply them with the int8 filter rows; each
 * smlad does two MACs. Columns are "reordered" (see tsr_dsp.h) and
 * interleaved by groups of four elements, pixel after pixel, so one pointer
 * walks them all. With room for four columns, one filter row at a time
 * meets four pixels: each filter word is loaded and sign-extended once for
 * four pixels, whose eight column words come in two ldm (an assembly loop
 * that keeps its 13 values in registers; 13 instructions per 16 MACs, the
 * groups unrolled sixteen deep and entered part way, so no loop counting
 * below k = 64).
 * With room for two, two filter rows meet two pixels.
 *
 * Fully connected layers first turn the vector into one int16 column
 * (input plus offset) when given room for it; then two filter rows at a
 * time meet it, eight values per turn: one ldm of four column words, one
 * ldrd of two filter words per row, four sxtb16 and four smlad per row (19
 * instructions per 16 MACs, unrolled sixteen deep and entered part way);
 * CMSIS-NN's per-channel half up with a bias (tsr_fc_hu) also requantizes
 * in the same assembly. Without the room, each input word is sign-extended
 * once for four filter rows, in C.
 */
#include <stddef.h>

#include "tsr_mm.h"

/* The assembly needs 13 registers: not with a frame pointer (-O0). */
#if TSR_HAVE_DSP && defined(__OPTIMIZE__)
#define TSR_MM_ASM 1
#else
#define TSR_MM_ASM 0
#endif

/* ---- columns ---------------------------------------------------------- */

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

#if TSR_MM_ASM
/* n values (a multiple of 8, at least 8) of src plus the offset (off2: in
 * both halves), doubled when dbl (a constant where inlined), into column
 * words at dst, `stride` bytes between groups of four: eight values a
 * turn, two loads, four sxtab16 (and four sadd16), two strd (11
 * instructions; 16 in C). */
TSR_INLINE void col_run8(int32_t *dst, const int8_t *src, int32_t n, int32_t off2, int32_t stride, int dbl)
{
    const int8_t *end = src + n;
    uint32_t a, b;
    int32_t c0, c1, c2, c3;
#define COL_RUN8(DBL)                                                                                    \
    __asm__ volatile("1:\n\t"                                                                            \
                     "ldr %[b], [%[x], #4]\n\t"                                                          \
                     "ldr %[a], [%[x]], #8\n\t"                                                          \
                     "sxtab16 %[c0], %[o], %[a]\n\t"                                                     \
                     "sxtab16 %[c1], %[o], %[a], ror #8\n\t"                                             \
                     "sxtab16 %[c2], %[o], %[b]\n\t"                                                     \
                     "sxtab16 %[c3], %[o], %[b], ror #8\n\t" DBL                                          \
                     "strd %[c0], %[c1], [%[d]]\n\t"                                                     \
                     "add %[d], %[d], %[s]\n\t"                                                          \
                     "strd %[c2], %[c3], [%[d]]\n\t"                                                     \
                     "add %[d], %[d], %[s]\n\t"                                                          \
                     "cmp %[x], %[end]\n\t"                                                              \
                     "bne 1b"                                                                           \
                     : [x] "+r"(src), [d] "+r"(dst), [a] "=&r"(a), [b] "=&r"(b), [c0] "=&r"(c0),         \
                       [c1] "=&r"(c1), [c2] "=&r"(c2), [c3] "=&r"(c3)                                    \
                     : [o] "r"(off2), [end] "r"(end), [s] "r"(stride)                                   \
                     : "cc", "memory")
    if (dbl)
        COL_RUN8("sadd16 %[c0], %[c0], %[c0]\n\tsadd16 %[c1], %[c1], %[c1]\n\t"
                 "sadd16 %[c2], %[c2], %[c2]\n\tsadd16 %[c3], %[c3], %[c3]\n\t");
    else
        COL_RUN8("");
#undef COL_RUN8
}
#endif

/* (col_put stays plain C: GCC inlines it into the im2col loops, which an
 * assembly block in it stops, ic_resnet8's 3x3 layers +3.5%; the callers
 * with long runs call col_run8 themselves) */
/* Elements [k, k + n) of one pixel's column (col: that pixel's first
 * words, P pixels interleaved): n values of src plus offset (doubled when
 * dbl), or zeros when src is NULL. */
static void col_put(int32_t *col, int32_t P, int32_t k, const int8_t *src, int32_t n, int32_t offset, int32_t dbl)
{
    if ((k & 3) == 0) {
        const int32_t off2 = tsr_dup16(offset);
        int32_t *dst = col + (k >> 2) * 2 * P;
        if (src && dbl) {
            for (; n >= 4; n -= 4, k += 4, src += 4, dst += 2 * P) {
                const uint32_t x = tsr_ld32(src);
                const int32_t a = tsr_sxtab16(off2, x), b = tsr_sxtab16_ror8(off2, x);
                dst[0] = tsr_sadd16(a, a);
                dst[1] = tsr_sadd16(b, b);
            }
        } else if (src) {
            for (; n >= 4; n -= 4, k += 4, src += 4, dst += 2 * P) {
                const uint32_t x = tsr_ld32(src);
                dst[0] = tsr_sxtab16(off2, x);
                dst[1] = tsr_sxtab16_ror8(off2, x);
            }
        } else {
            for (; n >= 4; n -= 4, k += 4, dst += 2 * P)
                dst[0] = dst[1] = 0;
        }
    }
    for (; n > 0; n--, k++)
        st16(col, col_index(k, P), src ? (*src++ + offset) << dbl : 0);
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

/* Bytes gathered on the stack when input channels are not a multiple of 4 */
#define GATHER_MAX 512

/* One pixel's receptive field into a column (pixel slot `p`), zero-padded
 * to a whole last group. With C_IN a multiple of 4, every (ky, kx) run
 * starts a group and converts in place; otherwise the window is first
 * gathered as int8 (padding as -input_offset, which the offset turns into
 * 0: input_offset is in [-127, 128]) and converted in one pass. */
static void im2col(int32_t *cols, int32_t P, int32_t p, const tsr_geom_t *g, int32_t oy, int32_t ox, int32_t dbl)
{
    const int32_t ci = g->in_c, k = g->kh * g->kw * ci, run = g->kw * ci;
    const int32_t iy0 = oy * g->sh - g->pt, ix0 = ox * g->sw - g->pl;
    const int32_t kx0 = ix0 < 0 ? -ix0 : 0, kx1 = ix0 + g->kw > g->in_w ? g->in_w - ix0 : g->kw;
    int32_t *col = cols + 2 * p;
    if ((ci & 3) && k <= GATHER_MAX - 3 && kx1 > kx0 && g->in_off >= -127 && g->in_off <= 128) {
        int8_t patch[GATHER_MAX];
        const int8_t pad = (int8_t)-g->in_off;
        const int32_t valid = (kx1 - kx0) * ci, before = kx0 * ci, after = (g->kw - kx1) * ci;
        int8_t *dst = patch;
        for (int32_t ky = 0; ky < g->kh; ky++) {
            const int32_t iy = iy0 + ky;
            if (iy < 0 || iy >= g->in_h) {
                for (int32_t i = 0; i < run; i++)
                    *dst++ = pad;
                continue;
            }
            const int8_t *src = g->in + (iy * g->in_w + ix0 + kx0) * ci;
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
        col_put(col, P, 0, patch, (k + 3) & ~3, g->in_off, dbl);
        return;
    }
    int32_t kk = 0;
    for (int32_t ky = 0; ky < g->kh; ky++) {
        int32_t iy = iy0 + ky;
        if (iy < 0 || iy >= g->in_h) {
            col_put(col, P, kk, NULL, run, 0, 0);
            kk += run;
            continue;
        }
        for (int32_t kx = 0; kx < g->kw; kx++, kk += ci) {
            if (kx < kx0 || kx >= kx1)
                col_put(col, P, kk, NULL, ci, 0, 0);
            else
                col_put(col, P, kk, g->in + (iy * g->in_w + ix0 + kx) * ci, ci, g->in_off, dbl);
        }
    }
    col_pad(col, P, k);
}

/* A 3x3 window of 3 channels (a first layer's) in the order of whole
 * words: each window row's first eight bytes as two words, then the three
 * rows' ninth bytes and a zero. The filter is copied in the same order
 * (rgb_filter); inside the input a row is two unaligned word loads and a
 * byte, at the borders the window is gathered as im2col does and
 * reordered. */
#define RGB_K 27

static const uint8_t rgb_order[28] = {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16,
                                      18, 19, 20, 21, 22, 23, 24, 25, 8, 17, 26, 27};

static void rgb_filter(int8_t *dst, const int8_t *w, int32_t co)
{
    for (int32_t c = 0; c < co; c++, w += RGB_K, dst += 28)
        for (int32_t i = 0; i < 28; i++)
            dst[i] = rgb_order[i] < RGB_K ? w[rgb_order[i]] : 0;
}

/* One word of the window as its two column words (doubled when dbl). */
TSR_INLINE int32_t *rgb_put(int32_t *col, int32_t P, uint32_t v, int32_t off2, int dbl)
{
    int32_t a = tsr_sxtab16(off2, v), c = tsr_sxtab16_ror8(off2, v);
    if (dbl) {
        a = tsr_sadd16(a, a);
        c = tsr_sadd16(c, c);
    }
    col[0] = a;
    col[1] = c;
    return col + 2 * P;
}

/* A window wholly inside the input straight into its column: six words
 * and the last three bytes (with -offset as the fourth lane, which the
 * offset turns into 0: |offset| <= 128 here); dbl is a constant where it
 * is inlined. */
TSR_INLINE void rgb_inside(int32_t *col, int32_t P, const int8_t *x, int32_t row, int32_t in_off, int dbl)
{
    const int32_t off2 = tsr_dup16(in_off);
    col = rgb_put(col, P, tsr_ld32(x), off2, dbl);
    col = rgb_put(col, P, tsr_ld32(x + 4), off2, dbl);
    col = rgb_put(col, P, tsr_ld32(x + row), off2, dbl);
    col = rgb_put(col, P, tsr_ld32(x + row + 4), off2, dbl);
    col = rgb_put(col, P, tsr_ld32(x + 2 * row), off2, dbl);
    col = rgb_put(col, P, tsr_ld32(x + 2 * row + 4), off2, dbl);
    rgb_put(col, P,
            (uint8_t)x[8] | (uint32_t)(uint8_t)x[row + 8] << 8 | (uint32_t)(uint8_t)x[2 * row + 8] << 16 |
                (uint32_t)(uint8_t)-in_off << 24,
            off2, dbl);
}

static void im2col_rgb(int32_t *cols, int32_t P, int32_t p, const tsr_geom_t *g, int32_t oy, int32_t ox, int32_t dbl)
{
    const int32_t iy0 = oy * g->sh - g->pt, ix0 = ox * g->sw - g->pl, row = g->in_w * 3;
    const int32_t off2 = tsr_dup16(g->in_off);
    int32_t *col = cols + 2 * p;
    uint32_t words[7];
    if (iy0 >= 0 && ix0 >= 0 && iy0 + 3 <= g->in_h && ix0 + 3 <= g->in_w) {
        const int8_t *x = g->in + iy0 * row + ix0 * 3;
        if (dbl)
            rgb_inside(col, P, x, row, g->in_off, 1);
        else
            rgb_inside(col, P, x, row, g->in_off, 0);
        return;
    } else {
        /* the window with its padding as -offset, then reordered */
        int8_t patch[28], *b = (int8_t *)words;
        const int8_t pad = (int8_t)-g->in_off;
        for (int32_t ky = 0; ky < 3; ky++)
            for (int32_t kx = 0; kx < 3; kx++) {
                const int32_t iy = iy0 + ky, ix = ix0 + kx;
                const int inside = iy >= 0 && iy < g->in_h && ix >= 0 && ix < g->in_w;
                for (int32_t ci = 0; ci < 3; ci++)
                    patch[(ky * 3 + kx) * 3 + ci] = inside ? g->in[iy * row + ix * 3 + ci] : pad;
            }
        patch[27] = pad;
        for (int32_t i = 0; i < 28; i++)
            b[i] = patch[rgb_order[i]];
    }
    for (int32_t i = 0; i < 7; i++)
        col = rgb_put(col, P, words[i], off2, dbl);
}

/* ---- four pixels: one filter row at a time ----------------------------- */

/* acc[0..3] += one filter row (k = 4 * groups + tail values) times four
 * interleaved columns. Per group of four values: one filter word loaded and
 * sign-extended once, the four pixels' column words in two ldm, eight
 * smlad. */
TSR_INLINE void mm_row4(const int8_t *w, const int32_t *col, int32_t groups, int32_t tail, int32_t *acc)
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
#if TSR_MM_ASM
    /* ldm takes its registers in ascending order: name them */
    register int32_t x0 __asm__("r8"), x1 __asm__("r9"), x2 __asm__("r10"), x3 __asm__("r11");
#define MM_GROUP4                                   \
    "ldr %[wv], [%[w]], #4\n\t"                     \
    "ldmia %[col]!, {%[x0], %[x1], %[x2], %[x3]}\n\t" \
    "sxtb16 %[t], %[wv]\n\t"                        \
    "sxtb16 %[wv], %[wv], ror #8\n\t"               \
    "smlad %[a0], %[t], %[x0], %[a0]\n\t"           \
    "smlad %[a0], %[wv], %[x1], %[a0]\n\t"          \
    "smlad %[a1], %[t], %[x2], %[a1]\n\t"           \
    "smlad %[a1], %[wv], %[x3], %[a1]\n\t"          \
    "ldmia %[col]!, {%[x0], %[x1], %[x2], %[x3]}\n\t" \
    "smlad %[a2], %[t], %[x0], %[a2]\n\t"           \
    "smlad %[a2], %[wv], %[x1], %[a2]\n\t"          \
    "smlad %[a3], %[t], %[x2], %[a3]\n\t"           \
    "smlad %[a3], %[wv], %[x3], %[a3]\n\t"
#define MM_LOOP(TURNS, BODY)                                                                              \
    if ((TURNS) > 0) {                                                                                    \
        int32_t n = (TURNS), wv, t;                                                                       \
        __asm__("1:\n\t" BODY "subs %[n], %[n], #1\n\tbne 1b"                                            \
                : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [w] "+r"(w), [col] "+r"(col), \
                  [n] "+r"(n), [wv] "=&r"(wv), [t] "=&r"(t), [x0] "=&r"(x0), [x1] "=&r"(x1),              \
                  [x2] "=&r"(x2), [x3] "=&r"(x3)                                                        \
                :                                                                                         \
                : "cc", "memory");                                                                        \
    }
    /* four groups per turn: 13 instructions a group plus 2 a turn; then the rest one a turn */
    MM_LOOP(groups >> 2, MM_GROUP4 MM_GROUP4 MM_GROUP4 MM_GROUP4)
    MM_LOOP(groups & 3, MM_GROUP4)
#undef MM_LOOP
#undef MM_GROUP4
#else
    for (; groups > 0; groups--, w += 4, col += 8) {
        uint32_t wv = tsr_ld32(w);
        int32_t w02 = tsr_sxtb16(wv), w13 = tsr_sxtb16_ror8(wv);
        a0 = tsr_smlad(w13, col[1], tsr_smlad(w02, col[0], a0));
        a1 = tsr_smlad(w13, col[3], tsr_smlad(w02, col[2], a1));
        a2 = tsr_smlad(w13, col[5], tsr_smlad(w02, col[4], a2));
        a3 = tsr_smlad(w13, col[7], tsr_smlad(w02, col[6], a3));
    }
#endif
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

/* The whole channel loop of four pixels in assembly, for the hot case:
 * filter rows of whole words (k % 4 == 0), a bias, one requantization per
 * channel, int8's own range. The C version (mm4_body) keeps 20 values live
 * around the 13 registers of the product and spills most of them per
 * channel; here the values the product does not need are parked with one
 * stm and fetched back with one ldm. Per channel: the product (13
 * instructions per group of four values), then the requantization of four
 * outputs (smmla, asr, ssat each; TFL: smmlar, add, asr, ssat) and four
 * strb. */
typedef struct {
    const int8_t *w;          /* filter rows [co][k] */
    const int32_t *cols;      /* four interleaved columns */
    int8_t *out;              /* pixel 0's outputs; pixel p's at out + p * co */
    const int32_t *bias;
    const int32_t *mul;
    const void *shift;        /* HU: CMSIS-NN's int32 left shifts; TFL: tessera's int8 right shifts */
    int32_t turns, rem;       /* whole passes of 16 groups after the first, groups the first skips */
    int32_t co;
    int32_t z21;              /* 1 + 2 * zero point */
    int32_t stride;           /* bytes from a pixel's outputs to the next's: co, or 0 (one pixel, in column 3) */
} tsr_mm4a_t;

#if TSR_MM_ASM
/* The start of an assembly function whose .macro takes its `name`: own
 * section, global but hidden, Thumb, r4-r11 and lr saved. */
#define TSR_ASM_ENTRY_HEAD                                  \
    ".pushsection .text.\\name, \"ax\", %progbits\n"     \
    ".align 2\n"                                           \
    ".global \\name\n"                                     \
    ".hidden \\name\n"                                     \
    ".type \\name, %function\n"                            \
    ".thumb_func\n"                                        \
    "\\name:\n"                                            \
    "push {r4-r11, lr}\n"

void tsr_mm4_hu_asm(const tsr_mm4a_t *a);
void tsr_mm4_tfl_asm(const tsr_mm4a_t *a);

/* r4 w; during the product r5 col, r6 count, r7 filter word, r12 its low
 * half, r8-r11 column words, r0-r3 accumulators; between products r5 out,
 * r6 co, r7 bias, r8 mul, r9 shift, r10 z21 (parked at [sp, #0..20]);
 * [sp, #24] cols, #28 turns, #32 the entry into the product's sixteen
 * unrolled groups (no loop counting below k = 64), #36 the bias array's
 * end, #40 z21 (TFL's requantization takes r10 as a temporary) */
__asm__(
    ".syntax unified\n"
    ".macro TSR_MM4_GROUP\n"
    "ldr r7, [r4], #4\n"
    "ldmia r5!, {r8, r9, r10, r11}\n"
    "sxtb16 r12, r7\n"
    "sxtb16 r7, r7, ror #8\n"
    "smlad r0, r12, r8, r0\n"
    "smlad r0, r7, r9, r0\n"
    "smlad r1, r12, r10, r1\n"
    "smlad r1, r7, r11, r1\n"
    "ldmia r5!, {r8, r9, r10, r11}\n"
    "smlad r2, r12, r8, r2\n"
    "smlad r2, r7, r9, r2\n"
    "smlad r3, r12, r10, r3\n"
    "smlad r3, r7, r11, r3\n"
    ".endm\n"
    ".macro TSR_MM4_ENTRY name\n"
    TSR_ASM_ENTRY_HEAD
    "sub sp, sp, #48\n"
    "ldr r4, [r0, #0]\n"
    "ldr r1, [r0, #4]\n"
    "str r1, [sp, #24]\n"
    "ldrd r1, r2, [r0, #24]\n"
    /* the entry into the unrolled product: skip groups of 52 bytes (13
     * instructions, all 32-bit), the Thumb bit set for ldr pc */
    "adr r3, 2f\n"
    "orr r3, r3, #1\n"
    "mov r12, #52\n"
    "mla r2, r2, r12, r3\n"
    "strd r1, r2, [sp, #28]\n"
    "ldr r5, [r0, #8]\n"
    "ldr r6, [r0, #32]\n"
    "ldr r7, [r0, #12]\n"
    "ldr r8, [r0, #16]\n"
    "ldr r9, [r0, #20]\n"
    "ldr r10, [r0, #36]\n"
    "str r10, [sp, #40]\n"
    "add r1, r7, r6, lsl #2\n"
    "str r1, [sp, #36]\n"
    "ldr r6, [r0, #40]\n"         /* the outputs' stride */
    ".endm\n"
    /* the product of one channel: accumulators from the bias (doubled: dbl 1) */
    ".macro TSR_MM4_PRODUCT dbl\n"
    "ldr r0, [r7], #4\n"
    ".if \\dbl\n"
    "lsls r0, r0, #1\n"
    ".endif\n"
    "mov r1, r0\n"
    "mov r2, r0\n"
    "mov r3, r0\n"
    "stm sp, {r5-r10}\n"
    "ldrd r5, r6, [sp, #24]\n"
    "ldr pc, [sp, #32]\n"
    "2:\n"
    ".rept 16\n"
    "TSR_MM4_GROUP\n"
    ".endr\n"
    "subs r6, r6, #1\n"
    "bpl 2b\n"
    "ldm sp, {r5-r10}\n"
    ".endm\n"
    /* four stores, the next channel or the end */
    ".macro TSR_MM4_STORE\n"
    "ssat r0, #8, r0\n"
    "ssat r1, #8, r1\n"
    "ssat r2, #8, r2\n"
    "ssat r3, #8, r3\n"
    "strb r0, [r5]\n"
    "strb r1, [r5, r6]\n"
    "add r11, r5, r6, lsl #1\n"
    "strb r2, [r11]\n"
    "strb r3, [r11, r6]\n"
    "adds r5, r5, #1\n"
    "ldr r11, [sp, #36]\n"
    "cmp r7, r11\n"
    "bne 1b\n"
    "add sp, sp, #48\n"
    "pop {r4-r11, pc}\n"
    ".endm\n"
    /* HU: y = smmla(acc, m, h) >> sh, sh = s - 32 = ~shift, h = (z21 << sh) >> 1 */
    "TSR_MM4_ENTRY tsr_mm4_hu_asm\n"
    "1:\n"
    "TSR_MM4_PRODUCT 0\n"
    "ldr r11, [r8], #4\n"
    "ldr lr, [r9], #4\n"
    "mvns lr, lr\n"
    "lsl r12, r10, lr\n"
    "asrs r12, r12, #1\n"
    "smmla r0, r0, r11, r12\n"
    "smmla r1, r1, r11, r12\n"
    "smmla r2, r2, r11, r12\n"
    "smmla r3, r3, r11, r12\n"
    "asrs r0, r0, lr\n"
    "asrs r1, r1, lr\n"
    "asrs r2, r2, lr\n"
    "asrs r3, r3, lr\n"
    "TSR_MM4_STORE\n"
    ".size tsr_mm4_hu_asm, .-tsr_mm4_hu_asm\n"
    ".popsection\n"
    /* TFL (doubled accumulators): y = (smmlar(acc, m, h) + (acc >> 31)) >> sh,
     * sh = s - 31, h = (z21 << sh) >> 1 */
    "TSR_MM4_ENTRY tsr_mm4_tfl_asm\n"
    "1:\n"
    "TSR_MM4_PRODUCT 1\n"
    "ldr r11, [r8], #4\n"
    "ldrsb lr, [r9], #1\n"
    "subs lr, lr, #31\n"
    "sub r12, lr, #1\n"
    "cmp r12, #22\n"
    "bhi 7f\n"
    "lsl r12, r10, r12\n"
    "smmlar r10, r0, r11, r12\n"
    "add r0, r10, r0, asr #31\n"
    "smmlar r10, r1, r11, r12\n"
    "add r1, r10, r1, asr #31\n"
    "smmlar r10, r2, r11, r12\n"
    "add r2, r10, r2, asr #31\n"
    "smmlar r10, r3, r11, r12\n"
    "add r3, r10, r3, asr #31\n"
    "asrs r0, r0, lr\n"
    "asrs r1, r1, lr\n"
    "asrs r2, r2, lr\n"
    "asrs r3, r3, lr\n"
    "8:\n"
    "ldr r10, [sp, #40]\n"
    "TSR_MM4_STORE\n"
    /* TFLW's channels (s outside 32..54), out of line: the rounding
     * constant 2^(sh-1) alone, the sign rule only when sh > 0, the zero
     * point after the shift */
    "7:\n"
    "push {r5, r6}\n"
    "movs r12, #1\n"
    "lsl r12, r12, lr\n"
    "lsrs r12, r12, #1\n"
    "cmp lr, #0\n"
    "ite eq\n"
    "moveq r5, #0\n"
    "movne r5, #-1\n"
    "asrs r6, r10, #1\n"
    ".irp acc, r0, r1, r2, r3\n"
    "smmlar r10, \\acc, r11, r12\n"
    "and \\acc, r5, \\acc, asr #31\n"
    "add \\acc, r10, \\acc\n"
    "asrs \\acc, \\acc, lr\n"
    "add \\acc, \\acc, r6\n"
    ".endr\n"
    "pop {r5, r6}\n"
    "b 8b\n"
    ".size tsr_mm4_tfl_asm, .-tsr_mm4_tfl_asm\n"
    ".popsection\n"
    ".purgem TSR_MM4_GROUP\n"
    ".purgem TSR_MM4_ENTRY\n"
    ".purgem TSR_MM4_PRODUCT\n"
    ".purgem TSR_MM4_STORE\n");
#endif

/* Eight-value filter rows (pointwise layers with 8 input channels, where
 * the product is two groups and the per-channel work of tsr_mm4_*_asm is
 * most of it): a channel's filter stays in four registers, sign-extended
 * once, with its bias and requantization constants, and meets the four
 * pixels unrolled (columns interleaved by four: pixel p's words at
 * 8p and 32 + 8p), the bias entering as the first smlad's addend. Per
 * channel about 20 instructions, per output 10 (HU) or 11 (TFL).
 * r0 bias, r1 m, r2 h, r3 sh, r4-r7 filter halves, r8 cols, r9 out,
 * r10 co, r11 r12 lr the column words and the accumulator; parked at
 * [sp, #0..12] the bias, mul, shift and filter pointers, #16 z21, #20 the
 * end of pixel 0's outputs. */
#if TSR_MM_ASM
void tsr_mm4_k8_hu_asm(const tsr_mm4a_t *a);
void tsr_mm4_k8_tfl_asm(const tsr_mm4a_t *a);

__asm__(
    ".syntax unified\n"
    ".macro TSR_K8_ENTRY name\n"
    TSR_ASM_ENTRY_HEAD
    "sub sp, sp, #24\n"
    "ldr r1, [r0, #12]\n"
    "ldr r2, [r0, #16]\n"
    "ldr r3, [r0, #20]\n"
    "ldr r4, [r0, #0]\n"
    "stm sp, {r1, r2, r3, r4}\n"
    "ldr r8, [r0, #4]\n"
    "ldr r9, [r0, #8]\n"
    "ldr r10, [r0, #32]\n"
    "ldr r1, [r0, #36]\n"
    "add r2, r9, r10\n"
    "strd r1, r2, [sp, #16]\n"
    "ldr r10, [r0, #40]\n"        /* the outputs' stride */
    ".endm\n"
    /* one pixel: the product, the requantization (TFL: the sign rule) */
    ".macro TSR_K8_PIXEL off, tfl\n"
    "ldrd r11, r12, [r8, #\\off]\n"
    "smlad r11, r4, r11, r0\n"
    "smlad r11, r5, r12, r11\n"
    "ldrd r12, lr, [r8, #(\\off + 32)]\n"
    "smlad r11, r6, r12, r11\n"
    "smlad r11, r7, lr, r11\n"
    ".if \\tfl\n"
    "smmlar r12, r11, r1, r2\n"
    "add r11, r12, r11, asr #31\n"
    ".else\n"
    "smmla r11, r11, r1, r2\n"
    ".endif\n"
    "asrs r11, r11, r3\n"
    "ssat r11, #8, r11\n"
    ".endm\n"
    ".macro TSR_K8_CHANNEL tfl\n"
    "1:\n"
    "ldm sp, {r0, r1, r2, r3}\n"
    "ldrd r4, r6, [r3], #8\n"
    "ldr r11, [r0], #4\n"
    "ldr r12, [r1], #4\n"
    ".if \\tfl\n"
    "ldrsb lr, [r2], #1\n"
    ".else\n"
    "ldr lr, [r2], #4\n"
    ".endif\n"
    "stm sp, {r0, r1, r2, r3}\n"
    "ldr r2, [sp, #16]\n"
    ".if \\tfl\n"
    "lsls r0, r11, #1\n"
    "sub r3, lr, #31\n"
    "sub lr, lr, #32\n"
    "lsl r2, r2, lr\n"
    ".else\n"
    "mov r0, r11\n"
    "mvns r3, lr\n"
    "lsl r2, r2, r3\n"
    "asrs r2, r2, #1\n"
    ".endif\n"
    "mov r1, r12\n"
    "sxtb16 r5, r4, ror #8\n"
    "sxtb16 r4, r4\n"
    "sxtb16 r7, r6, ror #8\n"
    "sxtb16 r6, r6\n"
    "TSR_K8_PIXEL 0, \\tfl\n"
    "strb r11, [r9]\n"
    "TSR_K8_PIXEL 8, \\tfl\n"
    "strb r11, [r9, r10]\n"
    "TSR_K8_PIXEL 16, \\tfl\n"
    "add r12, r9, r10, lsl #1\n"
    "strb r11, [r12]\n"
    "TSR_K8_PIXEL 24, \\tfl\n"
    "add r12, r9, r10, lsl #1\n"
    "strb r11, [r12, r10]\n"
    "adds r9, r9, #1\n"
    "ldr r12, [sp, #20]\n"
    "cmp r9, r12\n"
    "bne 1b\n"
    "add sp, sp, #24\n"
    "pop {r4-r11, pc}\n"
    ".endm\n"
    "TSR_K8_ENTRY tsr_mm4_k8_hu_asm\n"
    "TSR_K8_CHANNEL 0\n"
    ".size tsr_mm4_k8_hu_asm, .-tsr_mm4_k8_hu_asm\n"
    ".popsection\n"
    "TSR_K8_ENTRY tsr_mm4_k8_tfl_asm\n"
    "TSR_K8_CHANNEL 1\n"
    ".size tsr_mm4_k8_tfl_asm, .-tsr_mm4_k8_tfl_asm\n"
    ".popsection\n"
    ".purgem TSR_K8_ENTRY\n"
    ".purgem TSR_K8_PIXEL\n"
    ".purgem TSR_K8_CHANNEL\n");
#endif

/* All output channels of npix (1..4) pixels whose columns are interleaved
 * by four; pixel p's outputs at out + p * co. `mode`, `full` and (on the
 * hot path) npix are constants where it is instantiated. */
TSR_INLINE void mm4_body(const tsr_mm_t *mp, const int32_t *cols, int8_t *out, int32_t npix, int mode, int full)
{
    const tsr_mm_t m = *mp;
    const int32_t k = m.k, co = m.co, lo = m.q.lo, hi = m.q.hi;
    const int8_t *w = m.w;
    for (int32_t c = 0; c < co; c++, out++, w += k) {
        const int32_t b = m.bias ? tsr_shl(m.bias[c], m.dbl) : 0;
        int32_t acc[4] = {b, b, b, b};
        mm_row4(w, cols, k >> 2, k & 3, acc);
        if (mode == TSR_RQ_ANY) {
            for (int32_t i = 0; i < npix; i++)
                out[i * co] = tsr_rq_any(acc[i] >> m.dbl, &m.q, c);
            continue;
        }
        const tsr_rqc_t r = tsr_rqc(&m.q, c, mode);
        out[0] = tsr_rq_clamp(tsr_rq_val(acc[0], r, mode), lo, hi, full);
        if (npix > 1)
            out[co] = tsr_rq_clamp(tsr_rq_val(acc[1], r, mode), lo, hi, full);
        if (npix > 2)
            out[2 * co] = tsr_rq_clamp(tsr_rq_val(acc[2], r, mode), lo, hi, full);
        if (npix > 3)
            out[3 * co] = tsr_rq_clamp(tsr_rq_val(acc[3], r, mode), lo, hi, full);
    }
}

#define MM4(NAME, MODE, FULL)                                                                         \
    static __attribute__((noinline)) void NAME(const tsr_mm_t *m, const int32_t *cols, int8_t *out) \
    {                                                                                                 \
        mm4_body(m, cols, out, 4, MODE, FULL);                                                        \
    }
MM4(mm4_hu_full, TSR_RQ_HU, 1)
MM4(mm4_hu, TSR_RQ_HU, 0)
MM4(mm4_tfl_full, TSR_RQ_TFL, 1)
MM4(mm4_tfl, TSR_RQ_TFL, 0)
MM4(mm4_k64, TSR_RQ_K64, 0)
#undef MM4

#define MM4N(NAME, MODE)                                                                                   \
    static __attribute__((noinline)) void NAME(const tsr_mm_t *m, const int32_t *cols, int8_t *out,       \
                                              int32_t npix)                                              \
    {                                                                                                      \
        mm4_body(m, cols, out, npix, MODE, 0);                                                             \
    }
MM4N(mm4n_hu, TSR_RQ_HU)
MM4N(mm4n_tfl, TSR_RQ_TFL)
MM4N(mm4n_tflw, TSR_RQ_TFLW)
MM4N(mm4n_k64, TSR_RQ_K64)
MM4N(mm4n_any, TSR_RQ_ANY)
#undef MM4N

typedef void (*mm4_fn)(const tsr_mm_t *, const int32_t *, int8_t *);
typedef void (*mm4n_fn)(const tsr_mm_t *, const int32_t *, int8_t *, int32_t);

/* ---- two pixels: two filter rows at a time (columns too large for four) - */

#define MM_2X2_GROUP(wa, wb, x0, x1, y0, y1)                     \
    do {                                                         \
        int32_t w02 = tsr_sxtb16(wa), w13 = tsr_sxtb16_ror8(wa); \
        a00 = tsr_smlad(w02, x0, a00);                           \
        a00 = tsr_smlad(w13, x1, a00);                           \
        a01 = tsr_smlad(w02, y0, a01);                           \
        a01 = tsr_smlad(w13, y1, a01);                           \
        w02 = tsr_sxtb16(wb);                                    \
        w13 = tsr_sxtb16_ror8(wb);                               \
        a10 = tsr_smlad(w02, x0, a10);                           \
        a10 = tsr_smlad(w13, x1, a10);                           \
        a11 = tsr_smlad(w02, y0, a11);                           \
        a11 = tsr_smlad(w13, y1, a11);                           \
    } while (0)

TSR_INLINE int8_t mm_out1(int32_t acc, const tsr_mm_t *m, int32_t c, int mode)
{
    if (mode == TSR_RQ_ANY)
        return tsr_rq_any(acc >> m->dbl, &m->q, c);
    return tsr_rq_clamp(tsr_rq_val(acc, tsr_rqc(&m->q, c, mode), mode), m->q.lo, m->q.hi, 0);
}

/* All output channels of npix (1, 2) pixels (columns interleaved by two)
 * into out0 and out1. */
TSR_INLINE void mm2_body(const tsr_mm_t *mp, const int32_t *cols, int8_t *out0, int8_t *out1, int32_t npix, int mode)
{
    const tsr_mm_t m = *mp;
    const int32_t k = m.k, groups = k >> 2, tail = k & 3;
    for (int32_t c = 0; c < m.co; c += 2) {
        const int32_t c1 = c + 1 < m.co ? c + 1 : c;
        const int8_t *pa = m.w + c * k, *pb = m.w + c1 * k;
        const int32_t *col = cols;
        int32_t b0 = m.bias ? tsr_shl(m.bias[c], m.dbl) : 0, b1 = m.bias ? tsr_shl(m.bias[c1], m.dbl) : 0;
        int32_t a00 = b0, a01 = b0, a10 = b1, a11 = b1;
        for (int32_t g = groups; g > 0; g--, pa += 4, pb += 4, col += 4) {
            uint32_t wa = tsr_ld32(pa), wb = tsr_ld32(pb);
            MM_2X2_GROUP(wa, wb, col[0], col[1], col[2], col[3]);
        }
        if (tail) {   /* the columns are zero past k */
            uint32_t wa = ld_partial(pa, tail), wb = ld_partial(pb, tail);
            MM_2X2_GROUP(wa, wb, col[0], col[1], col[2], col[3]);
        }
        out0[c] = mm_out1(a00, &m, c, mode);
        if (npix > 1)
            out1[c] = mm_out1(a01, &m, c, mode);
        if (c1 != c) {
            out0[c1] = mm_out1(a10, &m, c1, mode);
            if (npix > 1)
                out1[c1] = mm_out1(a11, &m, c1, mode);
        }
    }
}

#define MM2(NAME, MODE)                                                                                     \
    static __attribute__((noinline)) void NAME(const tsr_mm_t *m, const int32_t *cols, int8_t *out0,       \
                                              int8_t *out1, int32_t npix)                                 \
    {                                                                                                       \
        mm2_body(m, cols, out0, out1, npix, MODE);                                                          \
    }
MM2(mm2_hu, TSR_RQ_HU)
MM2(mm2_tfl, TSR_RQ_TFL)
MM2(mm2_tflw, TSR_RQ_TFLW)
MM2(mm2_k64, TSR_RQ_K64)
MM2(mm2_any, TSR_RQ_ANY)
#undef MM2

typedef void (*mm2_fn)(const tsr_mm_t *, const int32_t *, int8_t *, int8_t *, int32_t);

/* The kernels for a product: `mode` unless a channel's constants fall
 * outside its fast form (then TSR_RQ_ANY), the ssat clamp when the range
 * is int8's own. */
typedef struct {
    int asm_mode;    /* TSR_RQ_HU or TSR_RQ_TFL: the assembly loop (tsr_mm4a_t) for four pixels; else -1 */
    mm4_fn four;     /* four pixels */
    mm4n_fn some;    /* 1..4 pixels */
    mm2_fn two;      /* 1..2 pixels, two-column buffer */
    void (*asm4)(const tsr_mm4a_t *);   /* that loop (eight-value rows: tsr_mm4_k8_*_asm) */
} mm_fns_t;

static mm_fns_t mm_fns(const tsr_mm_t *m, int mode)
{
    mm_fns_t f;
    const int full = m->q.lo == -128 && m->q.hi == 127;
    f.asm_mode = -1;
    f.asm4 = NULL;
#if TSR_MM_ASM
    /* the assembly's TFL takes TFLW's channels out of line */
    if ((mode == TSR_RQ_HU || mode == TSR_RQ_TFL || mode == TSR_RQ_TFLW) && full && m->bias && m->q.step == 1 &&
        (m->k & 3) == 0 && m->k > 0)
        f.asm_mode = mode == TSR_RQ_TFLW ? TSR_RQ_TFL : mode;
    /* TFL's eight-value rows need every channel in TFL's range (not TFLW's) */
    if (f.asm_mode == TSR_RQ_HU)
        f.asm4 = m->k == 8 ? tsr_mm4_k8_hu_asm : tsr_mm4_hu_asm;
    else if (f.asm_mode == TSR_RQ_TFL)
        f.asm4 = m->k == 8 && mode == TSR_RQ_TFL ? tsr_mm4_k8_tfl_asm : tsr_mm4_tfl_asm;
#endif
    if (mode == TSR_RQ_HU) {
        f.four = full ? mm4_hu_full : mm4_hu;
        f.some = mm4n_hu;
        f.two = mm2_hu;
    } else if (mode == TSR_RQ_TFL) {
        f.four = full ? mm4_tfl_full : mm4_tfl;
        f.some = mm4n_tfl;
        f.two = mm2_tfl;
    } else if (mode == TSR_RQ_TFLW) {
        f.four = NULL;
        f.some = mm4n_tflw;
        f.two = mm2_tflw;
    } else if (mode == TSR_RQ_K64) {
        f.four = mm4_k64;
        f.some = mm4n_k64;
        f.two = mm2_k64;
    } else {
        f.four = NULL;
        f.some = mm4n_any;
        f.two = mm2_any;
    }
    return f;
}

#if TSR_MM_ASM
/* the assembly's arguments for four pixels of columns cols (out: set per call) */
static tsr_mm4a_t mm4_args(const mm_fns_t *f, const tsr_mm_t *m, const int32_t *cols)
{
    tsr_mm4a_t a;
    a.w = m->w;
    a.cols = cols;
    a.out = NULL;
    a.bias = m->bias;
    a.mul = m->q.mul;
    a.co = m->co;
    /* k / 4 groups: the first pass the last g0 (1..16) of the unrolled
     * sixteen, then `turns` whole passes */
    const int32_t g = m->k >> 2, turns = (g - 1) >> 4;
    a.turns = turns;
    a.rem = 16 - (g - 16 * turns);
    a.z21 = 1 + 2 * m->q.zp;
    a.shift = f->asm_mode == TSR_RQ_HU ? (const void *)m->q.shift32 : (const void *)m->q.shift8;
    a.stride = m->co;
    return a;
}
#endif

static void mm4_run(const mm_fns_t *f, const tsr_mm_t *m, const int32_t *cols, int8_t *out, int32_t npix)
{
#if TSR_MM_ASM
    if (npix == 4 && f->asm_mode >= 0) {
        tsr_mm4a_t a = mm4_args(f, m, cols);
        a.out = out;
        f->asm4(&a);
        return;
    }
#endif
    if (npix == 4 && f->four)
        f->four(m, cols, out);
    else
        f->some(m, cols, out, npix);
}

/* ---- entry points ------------------------------------------------------ */

/* The product as it runs: the mode the requantization allows (tsr_rq_mode)
 * and its accumulators doubled for TSR_RQ_TFL and TSR_RQ_TFLW. */
static tsr_mm_t mm_resolve(const tsr_mm_t *m, int32_t in_off, int *mode)
{
    tsr_mm_t r = *m;
    *mode = tsr_rq_mode(&m->q, *mode, m->co, m->bias, tsr_mac_bound(m->k, in_off));
    r.dbl = *mode == TSR_RQ_TFL || *mode == TSR_RQ_TFLW;
    return r;
}

int tsr_mm_conv(const tsr_mm_t *m0, const tsr_geom_t *g, int32_t *buf, int32_t buf_bytes, int mode)
{
    const int32_t k = m0->k;
    if (buf == NULL || buf_bytes < tsr_cols_bytes(k, 2))
        return 0;
    tsr_mm_t mm = mm_resolve(m0, g->in_off, &mode);
    const int four = buf_bytes >= tsr_cols_bytes(k, 4);
    const int32_t kw = (k + 3) & ~3, cols = tsr_cols_bytes(k, four ? 4 : 2);
    /* the first layer's 3x3x3 windows in whole words (im2col_rgb) */
    const int rgb = g->kh == 3 && g->kw == 3 && g->in_c == 3 && g->in_off >= -127 && g->in_off <= 128 &&
                    buf_bytes - cols >= mm.co * kw;
    if (rgb) {
        int8_t *wp = (int8_t *)buf + cols;
        rgb_filter(wp, mm.w, mm.co);
        mm.w = wp;
        mm.k = kw;
    } else if ((k & 3) && buf_bytes - cols >= mm.co * kw) {
        /* rows of whole words (the assembly's; a first layer's 3x3x3 patch):
         * the filter copied with a zero after each row, after the columns */
        int8_t *wp = (int8_t *)buf + cols;
        for (int32_t c = 0; c < mm.co; c++)
            for (int32_t i = 0; i < kw; i++)
                wp[c * kw + i] = i < k ? mm.w[c * k + i] : 0;
        mm.w = wp;
        mm.k = kw;
    }
    const tsr_mm_t *m = &mm;
    const mm_fns_t f = mm_fns(m, mode);
    const int32_t pixels = g->out_h * g->out_w, ow = g->out_w, co = m->co;
    int32_t p = 0;
    if (four) {
        const int32_t row = g->in_w * g->in_c;
        for (; p < pixels; p += 4) {
            const int32_t np = pixels - p < 4 ? pixels - p : 4;
            for (int32_t i = 0; i < np; i++) {
                const int32_t oy = (p + i) / ow, ox = (p + i) % ow;
                const int32_t iy0 = oy * g->sh - g->pt, ix0 = ox * g->sw - g->pl;
                /* a first layer's window inside the input: in line */
                if (rgb && iy0 >= 0 && ix0 >= 0 && iy0 + 3 <= g->in_h && ix0 + 3 <= g->in_w) {
                    const int8_t *x = g->in + iy0 * row + ix0 * 3;
                    if (m->dbl)
                        rgb_inside(buf + 2 * i, 4, x, row, g->in_off, 1);
                    else
                        rgb_inside(buf + 2 * i, 4, x, row, g->in_off, 0);
                } else {
                    (rgb ? im2col_rgb : im2col)(buf, 4, i, g, oy, ox, m->dbl);
                }
            }
            mm4_run(&f, m, buf, g->out + p * co, np);
        }
        return 1;
    }
    for (; p < pixels; p += 2) {
        const int32_t np = pixels - p < 2 ? pixels - p : 2;
        for (int32_t i = 0; i < np; i++)
            (rgb ? im2col_rgb : im2col)(buf, 2, i, g, (p + i) / ow, (p + i) % ow, m->dbl);
        f.two(m, buf, g->out + p * co, g->out + (p + np - 1) * co, np);
    }
    return 1;
}

int tsr_mm_pointwise(const tsr_mm_t *m0, const int8_t *in, int32_t pixels, int32_t in_off, int8_t *out, int32_t *buf,
                     int32_t buf_bytes, int mode)
{
    const int32_t ci = m0->k, co = m0->co;
    if (buf == NULL || buf_bytes < tsr_cols_bytes(ci, 2))
        return 0;
    const tsr_mm_t mm = mm_resolve(m0, in_off, &mode), *m = &mm;
    const mm_fns_t f = mm_fns(m, mode);
    int32_t p = 0;
    if (buf_bytes >= tsr_cols_bytes(ci, 4)) {
#if TSR_MM_ASM
        /* whole groups of four pixels of whole groups of eight values: the
         * columns built inline, the assembly's arguments made once */
        if (f.asm_mode >= 0 && !(ci & 7) && pixels >= 4) {
            tsr_mm4a_t a = mm4_args(&f, m, buf);
            const int32_t off2 = tsr_dup16(in_off);
            for (; p + 4 <= pixels; p += 4) {
                const int8_t *x = in + p * ci;
                for (int32_t i = 0; i < 4; i++, x += ci)
                    if (m->dbl)
                        col_run8(buf + 2 * i, x, ci, off2, 32, 1);
                    else
                        col_run8(buf + 2 * i, x, ci, off2, 32, 0);
                a.out = out + p * co;
                f.asm4(&a);
            }
        }
#endif
        for (; p < pixels; p += 4) {
            const int32_t np = pixels - p < 4 ? pixels - p : 4;
#if TSR_MM_ASM
            /* one pixel left: the assembly on four columns, the pixel in
             * the last (the other three whatever they hold), every
             * pixel's outputs stored at its place (stride 0) and the
             * last's stored last */
            if (np == 1 && f.asm_mode >= 0) {
                tsr_mm4a_t a = mm4_args(&f, m, buf);
                col_put(buf + 6, 4, 0, in + p * ci, ci, in_off, m->dbl);
                col_pad(buf + 6, 4, ci);
                a.out = out + p * co;
                a.stride = 0;
                f.asm4(&a);
                break;
            }
#endif
            for (int32_t i = 0; i < np; i++) {
                col_put(buf + 2 * i, 4, 0, in + (p + i) * ci, ci, in_off, m->dbl);
                col_pad(buf + 2 * i, 4, ci);
            }
            mm4_run(&f, m, buf, out + p * co, np);
        }
        return 1;
    }
    for (; p < pixels; p += 2) {
        const int32_t np = pixels - p < 2 ? pixels - p : 2;
        for (int32_t i = 0; i < np; i++) {
            col_put(buf + 2 * i, 2, 0, in + (p + i) * ci, ci, in_off, m->dbl);
            col_pad(buf + 2 * i, 2, ci);
        }
        f.two(m, buf, out + p * co, out + (p + np - 1) * co, np);
    }
    return 1;
}

/* ---- fully connected --------------------------------------------------- */

/* acc[0..R) += rows r0.. (k apart) times x + off, over k values: each input
 * word is sign-extended once for the R rows. */
TSR_INLINE void fc_rows(const int8_t *x, const int8_t *w, int32_t k, int32_t off, int32_t *acc, int32_t R)
{
    const int32_t off2 = tsr_dup16(off), groups = k >> 2;
    int32_t a0 = acc[0], a1 = R > 1 ? acc[1] : 0, a2 = R > 2 ? acc[2] : 0, a3 = R > 3 ? acc[3] : 0;
    const int8_t *p0 = w, *p1 = w + k, *p2 = w + 2 * k, *p3 = w + 3 * k;
    for (int32_t g = groups; g > 0; g--, x += 4) {
        const uint32_t xv = tsr_ld32(x);
        const int32_t x02 = tsr_sxtab16(off2, xv), x13 = tsr_sxtab16_ror8(off2, xv);
        uint32_t v = tsr_ld32(p0);
        p0 += 4;
        a0 = tsr_smlad(tsr_sxtb16_ror8(v), x13, tsr_smlad(tsr_sxtb16(v), x02, a0));
        if (R > 1) {
            v = tsr_ld32(p1);
            p1 += 4;
            a1 = tsr_smlad(tsr_sxtb16_ror8(v), x13, tsr_smlad(tsr_sxtb16(v), x02, a1));
        }
        if (R > 2) {
            v = tsr_ld32(p2);
            p2 += 4;
            a2 = tsr_smlad(tsr_sxtb16_ror8(v), x13, tsr_smlad(tsr_sxtb16(v), x02, a2));
        }
        if (R > 3) {
            v = tsr_ld32(p3);
            p3 += 4;
            a3 = tsr_smlad(tsr_sxtb16_ror8(v), x13, tsr_smlad(tsr_sxtb16(v), x02, a3));
        }
    }
    for (int32_t j = 0; j < (k & 3); j++) {
        const int32_t xv = x[j] + off;
        a0 += xv * p0[j];
        if (R > 1)
            a1 += xv * p1[j];
        if (R > 2)
            a2 += xv * p2[j];
        if (R > 3)
            a3 += xv * p3[j];
    }
    acc[0] = a0;
    if (R > 1)
        acc[1] = a1;
    if (R > 2)
        acc[2] = a2;
    if (R > 3)
        acc[3] = a3;
}

#if TSR_MM_ASM
/* What tsr_fc_asm reads (the offsets are the assembly's). */
typedef struct {
    const int32_t *col;         /*  0 */
    const int8_t *w;            /*  4 */
    int32_t k, pairs;           /*  8, 12 */
    int32_t *acc;               /* 16 */
    const int32_t *init;        /* 20: the accumulators' first values (the bias; may be acc) */
    const int32_t *mul, *shift; /* 24, 28: CMSIS-NN's left shifts */
    int32_t z21;                /* 32: 1 + 2 zp */
    int8_t *out;                /* 36: NULL: the products only */
} tsr_fc_asm_t;

/* acc[2p], acc[2p + 1] = init[2p], init[2p + 1] plus rows 2p, 2p + 1 of
 * w ([rows][k], word-aligned, k a multiple of 8) times column col, for
 * p < pairs (at least one): the fully connected product in assembly, two
 * rows per eight values. The
 * groups of eight are unrolled sixteen deep and entered part way (the
 * first pass takes k / 8 mod 16 of them, or 16), so a row of up to 128
 * values runs without a loop count; a pair costs 14 instructions besides
 * its groups. r0-r1 accumulators, r2 col, r3 row a, r4 row b (its end: the
 * next pair's row a), r5 the column's end, r6 r7 r12 filter words, r8-r11
 * column words, lr acc; [sp]: col, k, the entry (Thumb bit set: ldr pc),
 * the filter's end, the arguments, init. Every instruction of a group is
 * 32 bits wide (76 bytes a group: the entry's arithmetic, checked below).
 * With out, then the outputs (CMSIS-NN's half up into int8's own range,
 * tsr_rq_val's HU form), two a turn, 12 instructions an output: r0 acc,
 * r3 mul, r4 shift, r5 z21, r6 out, r7 its end; r8 r9 the values, r10 r11
 * the rounding terms, r12 lr the right shifts, r1 the multipliers. It
 * stops before a pair holding a channel outside HU's range
 * (1 <= s - 32 <= 22) and returns the outputs written (0 without out). */
int32_t tsr_fc_asm(const tsr_fc_asm_t *a);
__asm__(
    ".syntax unified\n"
    ".pushsection .text.tsr_fc_asm, \"ax\", %progbits\n"
    ".align 2\n"
    ".global tsr_fc_asm\n"
    ".hidden tsr_fc_asm\n"
    ".type tsr_fc_asm, %function\n"
    ".thumb_func\n"
    ".macro TSR_FC_GROUP\n"
    "ldmia.w r2!, {r8, r9, r10, r11}\n"
    "ldrd r6, r7, [r3], #8\n"
    "sxtb16 r12, r6\n"
    "smlad r0, r12, r8, r0\n"
    "sxtb16 r6, r6, ror #8\n"
    "smlad r0, r6, r9, r0\n"
    "sxtb16 r12, r7\n"
    "smlad r0, r12, r10, r0\n"
    "sxtb16 r7, r7, ror #8\n"
    "smlad r0, r7, r11, r0\n"
    "ldrd r6, r7, [r4], #8\n"
    "sxtb16 r12, r6\n"
    "smlad r1, r12, r8, r1\n"
    "sxtb16 r6, r6, ror #8\n"
    "smlad r1, r6, r9, r1\n"
    "sxtb16 r12, r7\n"
    "smlad r1, r12, r10, r1\n"
    "sxtb16 r7, r7, ror #8\n"
    "smlad r1, r7, r11, r1\n"
    ".endm\n"
    "tsr_fc_asm:\n"
    "push {r4-r11, lr}\n"
    "sub sp, sp, #24\n"
    "str r0, [sp, #16]\n"
    "ldr r12, [r0, #20]\n"
    "str r12, [sp, #20]\n"        /* init */
    "ldrd r12, r1, [r0]\n"         /* col, w */
    "ldrd r2, r3, [r0, #8]\n"      /* k, pairs */
    "ldr lr, [r0, #16]\n"          /* acc */
    "str r12, [sp, #0]\n"
    "str r2, [sp, #4]\n"
    "add r5, r12, r2, lsl #1\n"    /* the column's end: 2k bytes */
    "mul r12, r2, r3\n"
    "add r12, r1, r12, lsl #1\n"   /* the filter's end: 2k bytes a pair */
    "str r12, [sp, #12]\n"
    "lsrs r12, r2, #3\n"           /* groups of eight */
    "subs r12, r12, #1\n"
    "and r12, r12, #15\n"
    "adds r12, r12, #1\n"          /* the first pass's groups, 1..16 */
    "movs r6, #76\n"
    "mul r12, r12, r6\n"
    "adr.w r6, 5f\n"
    "sub r6, r6, r12\n"
    "orr r6, r6, #1\n"
    "str r6, [sp, #8]\n"
    "mov r4, r1\n"
    "1:\n"
    "mov r3, r4\n"
    "ldr r2, [sp, #0]\n"
    "ldr r4, [sp, #4]\n"
    "add r4, r4, r3\n"
    "ldr r12, [sp, #20]\n"
    "ldrd r0, r1, [r12], #8\n"
    "str r12, [sp, #20]\n"
    "ldr pc, [sp, #8]\n"
    "4:\n"
    ".rept 16\n"
    "TSR_FC_GROUP\n"
    ".endr\n"
    "5:\n"
    ".if (5b - 4b) != 16 * 76\n"
    ".error \"tsr_fc_asm: a group is not 76 bytes\"\n"
    ".endif\n"
    "cmp r2, r5\n"
    "bne 4b\n"
    "strd r0, r1, [lr], #8\n"
    "ldr r12, [sp, #12]\n"
    "cmp r4, r12\n"
    "bne 1b\n"
    /* the outputs */
    "ldr r0, [sp, #16]\n"
    "ldrd r5, r6, [r0, #32]\n"     /* z21, out */
    "cbnz r6, 6f\n"
    "movs r0, #0\n"
    "b 9f\n"
    "6:\n"
    "ldrd r3, r4, [r0, #24]\n"     /* mul, shift */
    "ldr r7, [r0, #12]\n"
    "add r7, r6, r7, lsl #1\n"     /* out's end: two a pair */
    "ldr r0, [r0, #16]\n"          /* acc */
    "7:\n"
    "ldrd r12, lr, [r4], #8\n"
    "mvn r12, r12\n"               /* s - 32 = ~shift */
    "mvn lr, lr\n"
    "sub r10, r12, #1\n"
    "sub r11, lr, #1\n"
    "cmp r10, #21\n"
    "it ls\n"
    "cmpls r11, #21\n"
    "bhi 8f\n"
    "lsl r10, r5, r10\n"           /* (1 + 2 zp) << (s - 33) */
    "lsl r11, r5, r11\n"
    "ldrd r8, r9, [r0], #8\n"
    "ldr r1, [r3], #4\n"
    "smmla r8, r8, r1, r10\n"
    "ldr r1, [r3], #4\n"
    "smmla r9, r9, r1, r11\n"
    "asr r8, r8, r12\n"
    "asr r9, r9, lr\n"
    "ssat r8, #8, r8\n"
    "ssat r9, #8, r9\n"
    "strb r8, [r6], #1\n"
    "strb r9, [r6], #1\n"
    "cmp r6, r7\n"
    "bne 7b\n"
    "8:\n"
    "ldr r0, [sp, #16]\n"
    "ldr r0, [r0, #36]\n"
    "sub r0, r6, r0\n"
    "9:\n"
    "add sp, sp, #24\n"
    "pop {r4-r11, pc}\n"
    ".size tsr_fc_asm, .-tsr_fc_asm\n"
    ".popsection\n"
    ".purgem TSR_FC_GROUP\n");

/* the products only, from init */
static inline void tsr_fc_pairs_asm(const int32_t *col, const int8_t *w, int32_t k, int32_t pairs, int32_t *acc,
                                    const int32_t *init)
{
    const tsr_fc_asm_t a = {col, w, k, pairs, acc, init, NULL, NULL, 0, NULL};
    tsr_fc_asm(&a);
}
#endif

/* acc[0..1] += rows wa, wb times column col (int16 pairs: per four
 * values (x0, x2), (x1, x3)) over 8 * n8 values, then the values left
 * (k % 8, from the column's int16 entries). The rows must be word-aligned
 * (ldrd). */
TSR_INLINE void fc_dot2(const int32_t *col, const int8_t *wa, const int8_t *wb, int32_t k, int32_t *acc)
{
    int32_t a0 = acc[0], a1 = acc[1], n8 = k >> 3;
#if TSR_MM_ASM
    if (n8 > 0) {
        register int32_t x0 __asm__("r8"), x1 __asm__("r9"), x2 __asm__("r10"), x3 __asm__("r11");
        int32_t w0, w1, t;
        __asm__("1:\n\t"
                "ldmia %[col]!, {%[x0], %[x1], %[x2], %[x3]}\n\t"
                "ldrd %[w0], %[w1], [%[wa]], #8\n\t"
                "sxtb16 %[t], %[w0]\n\t"
                "smlad %[a0], %[t], %[x0], %[a0]\n\t"
                "sxtb16 %[w0], %[w0], ror #8\n\t"
                "smlad %[a0], %[w0], %[x1], %[a0]\n\t"
                "sxtb16 %[t], %[w1]\n\t"
                "smlad %[a0], %[t], %[x2], %[a0]\n\t"
                "sxtb16 %[w1], %[w1], ror #8\n\t"
                "smlad %[a0], %[w1], %[x3], %[a0]\n\t"
                "ldrd %[w0], %[w1], [%[wb]], #8\n\t"
                "sxtb16 %[t], %[w0]\n\t"
                "smlad %[a1], %[t], %[x0], %[a1]\n\t"
                "sxtb16 %[w0], %[w0], ror #8\n\t"
                "smlad %[a1], %[w0], %[x1], %[a1]\n\t"
                "sxtb16 %[t], %[w1]\n\t"
                "smlad %[a1], %[t], %[x2], %[a1]\n\t"
                "sxtb16 %[w1], %[w1], ror #8\n\t"
                "smlad %[a1], %[w1], %[x3], %[a1]\n\t"
                "subs %[n], %[n], #1\n\t"
                "bne 1b"
                : [a0] "+r"(a0), [a1] "+r"(a1), [col] "+r"(col), [wa] "+r"(wa), [wb] "+r"(wb), [n] "+r"(n8),
                  [x0] "=&r"(x0), [x1] "=&r"(x1), [x2] "=&r"(x2), [x3] "=&r"(x3), [w0] "=&r"(w0), [w1] "=&r"(w1),
                  [t] "=&r"(t)
                :
                : "cc", "memory");
    }
#else
    for (; n8 > 0; n8--, col += 4, wa += 8, wb += 8) {
        const uint32_t va0 = tsr_ld32(wa), va1 = tsr_ld32(wa + 4), vb0 = tsr_ld32(wb), vb1 = tsr_ld32(wb + 4);
        a0 = tsr_smlad(tsr_sxtb16(va0), col[0], tsr_smlad(tsr_sxtb16_ror8(va0), col[1], a0));
        a0 = tsr_smlad(tsr_sxtb16(va1), col[2], tsr_smlad(tsr_sxtb16_ror8(va1), col[3], a0));
        a1 = tsr_smlad(tsr_sxtb16(vb0), col[0], tsr_smlad(tsr_sxtb16_ror8(vb0), col[1], a1));
        a1 = tsr_smlad(tsr_sxtb16(vb1), col[2], tsr_smlad(tsr_sxtb16_ror8(vb1), col[3], a1));
    }
#endif
    for (int32_t i = k & ~7; i < k; i++, wa++, wb++) {
        int16_t v;
        memcpy(&v, (const int16_t *)(const void *)col + col_index(i & 7, 1), 2);
        a0 += v * *wa;
        a1 += v * *wb;
    }
    acc[0] = a0;
    acc[1] = a1;
}

/* Outputs [c, c + n) of a fully connected layer from their products:
 * bias, requantization (per channel when `step`), clamp (ssat when
 * `full`); the flags are constants where it is inlined. */
TSR_INLINE void fc_out(const int32_t *acc, int32_t n, const tsr_mm_t *m, int32_t c, int8_t *out, tsr_rqc_t r, int mode,
                       int full, int step, int hasb)
{
    const int32_t lo = m->q.lo, hi = m->q.hi;
    for (int32_t i = 0; i < n; i++) {
        const int32_t a = acc[i] + (hasb ? m->bias[c + i] : 0);
        if (step)
            r = tsr_rqc(&m->q, c + i, mode);
        out[c + i] = tsr_rq_clamp(tsr_rq_val(a, r, mode), lo, hi, full);
    }
}

#if TSR_MM_ASM
/* The fully connected layer's hot case, CMSIS-NN's per-channel half up
 * with a bias into int8's own range (tsr_fc_hu: k a multiple of 8,
 * word-aligned rows and column), on its own: the column (col_run8), then
 * tsr_fc_asm's products and outputs, the HU range checked on the way
 * instead of in a pass over the shifts before (a channel outside it takes
 * tsr_rq_any, below). */
/* Outputs [c, c + n) in C from their accumulators (bias included): one
 * channel outside HU's range takes tsr_rq_any */
static void fc_out_hu(const int32_t *acc, int32_t n, const tsr_fc_hu_t *f, int32_t c, int8_t *out)
{
    const int32_t z21 = 1 + 2 * f->zp;
    const tsr_rqp_t q = tsr_rqp_cmsis(f->mul, f->shift, f->zp, -128, 127);
    for (int32_t i = 0; i < n; i++) {
        const int32_t a = acc[i], sh = ~f->shift[c + i], t = sh - 1;
        if ((uint32_t)t > 21u)
            out[c + i] = tsr_rq_any(a, &q, c + i);
        else
            out[c + i] = (int8_t)tsr_sat8(tsr_smmla(a, f->mul[c + i], tsr_shl(z21, t)) >> sh);
    }
}
#endif

int tsr_fc_hu(const tsr_fc_hu_t *f, const int8_t *x, int32_t off, int8_t *out, int32_t *col, int32_t col_bytes)
{
#if TSR_MM_ASM
    const int32_t k = f->k, co = f->co;
    if (k < 8 || ((k & 7) | ((uintptr_t)f->w & 3) | ((uintptr_t)col & 3)) || col_bytes < 2 * k)
        return 0;
    int32_t c = 0, acc[32];
    col_run8(col, x, k, tsr_dup16(off), 8, 0);
    tsr_fc_asm_t a = {col, f->w, k, 0, acc, f->bias, f->mul, f->shift, 1 + 2 * f->zp, out};
    for (int32_t n; (n = co - c < 32 ? (co - c) & ~1 : 32) > 0; c += n) {
        a.pairs = n >> 1;
        const int32_t done = tsr_fc_asm(&a);
        if (done < n)
            fc_out_hu(acc + done, n - done, f, c + done, out);
        a.w += n * k;
        a.init += n;
        a.mul += n;
        a.shift += n;
        a.out += n;
    }
    if (c < co) {
        acc[0] = f->bias[c];
        fc_rows(x, f->w + c * k, k, off, acc, 1);
        fc_out_hu(acc, 1, f, c, out);
    }
    return 1;
#else
    (void)f, (void)x, (void)off, (void)out, (void)col, (void)col_bytes;
    return 0;
#endif
}

TSR_INLINE void fc_body(const tsr_mm_t *mp, const int8_t *x, int32_t off, int8_t *out, int32_t *col, int mode)
{
    const tsr_mm_t m = *mp;
    const int32_t k = m.k, co = m.co, lo = m.q.lo, hi = m.q.hi;
    tsr_rqc_t r = {0, 0, 0, 0, 0};
    if (mode != TSR_RQ_ANY && m.q.step == 0)
        r = tsr_rqc(&m.q, 0, mode);
    if (col) {
        col_put(col, 1, 0, x, k, off, 0);
        col_pad(col, 1, k);
    }
    int32_t c = 0;
#if TSR_MM_ASM
    /* pairs of rows in assembly, 16 at a time, then their outputs */
    if (col && k >= 8 && !((uintptr_t)m.w & 3) && !(k & 7)) {
        for (; c + 1 < co; ) {
            int32_t acc[16];
            const int32_t n = co - c < 16 ? (co - c) & ~1 : 16;
            /* the accumulators start from the bias (or zero) */
            if (!m.bias)
                for (int32_t i = 0; i < n; i++)
                    acc[i] = 0;
            tsr_fc_pairs_asm(col, m.w + c * k, k, n >> 1, acc, m.bias ? m.bias + c : acc);
            if (mode == TSR_RQ_ANY) {
                for (int32_t i = 0; i < n; i++, c++)
                    out[c] = tsr_rq_any(acc[i], &m.q, c);
                continue;
            }
            const int full = lo == -128 && hi == 127;
            if (full && !m.q.step)
                fc_out(acc, n, &m, c, out, r, mode, 1, 0, 0);
            else if (full)
                fc_out(acc, n, &m, c, out, r, mode, 1, 1, 0);
            else
                fc_out(acc, n, &m, c, out, r, mode, 0, m.q.step != 0, 0);
            c += n;
        }
    }
#endif
    for (; c < co; c += 4) {
        const int32_t R = co - c < 4 ? co - c : 4;
        int32_t acc[4];
        for (int32_t i = 0; i < R; i++)
            acc[i] = m.bias ? m.bias[c + i] : 0;
        if (col && !(((uintptr_t)m.w | (uintptr_t)k) & 3)) {
            const int8_t *w = m.w + c * k;
            if (R >= 2)
                fc_dot2(col, w, w + k, k, acc);
            else
                fc_rows(x, w, k, off, acc, 1);
            if (R == 4)
                fc_dot2(col, w + 2 * k, w + 3 * k, k, acc + 2);
            else if (R == 3)
                fc_rows(x, w + 2 * k, k, off, acc + 2, 1);
        } else if (R == 4)
            fc_rows(x, m.w + c * k, k, off, acc, 4);
        else if (R == 3)
            fc_rows(x, m.w + c * k, k, off, acc, 3);
        else if (R == 2)
            fc_rows(x, m.w + c * k, k, off, acc, 2);
        else
            fc_rows(x, m.w + c * k, k, off, acc, 1);
        for (int32_t i = 0; i < R; i++) {
            if (mode == TSR_RQ_ANY) {
                out[c + i] = tsr_rq_any(acc[i], &m.q, c + i);
                continue;
            }
            if (m.q.step)
                r = tsr_rqc(&m.q, c + i, mode);
            out[c + i] = tsr_rq_clamp(tsr_rq_val(acc[i], r, mode), lo, hi, 0);
        }
    }
}

#define FC(NAME, MODE)                                                                                \
    static __attribute__((noinline)) void NAME(const tsr_mm_t *m, const int8_t *x, int32_t off, int8_t *out, \
                                              int32_t *col)                                               \
    {                                                                                                     \
        fc_body(m, x, off, out, col, MODE);                                                               \
    }
FC(fc_hu, TSR_RQ_HU)
FC(fc_tflx, TSR_RQ_TFLX)
FC(fc_k64, TSR_RQ_K64)
FC(fc_any, TSR_RQ_ANY)
#undef FC

void tsr_mm_fc(const tsr_mm_t *m, const int8_t *x, int32_t in_off, int8_t *out, int32_t *buf, int32_t buf_bytes,
               int mode)
{
    /* plain accumulators here (TSR_RQ_TFLX for TFLite's rounding) */
    if (mode == TSR_RQ_HU && m->q.shift32 && !m->q.rq && m->q.step && m->bias && m->q.lo == -128 &&
        m->q.hi == 127) {
        const tsr_fc_hu_t f = {m->w, m->bias, m->q.mul, m->q.shift32, m->k, m->co, m->q.zp};
        if (tsr_fc_hu(&f, x, in_off, out, buf, buf ? buf_bytes : 0))
            return;
    }
    /* CMSIS-NN's per-channel arrays checked in one pass (tsr_rq_fast's HU
     * range: left shifts -23..-2) */
    if (mode == TSR_RQ_HU && m->q.shift32 && !m->q.rq && m->q.step) {
        for (int32_t c = 0; c < m->co; c++)
            if ((uint32_t)(m->q.shift32[c] + 23) > 21u) {
                mode = TSR_RQ_ANY;
                break;
            }
    } else if (!tsr_rq_fast(&m->q, mode, m->co))
        mode = TSR_RQ_ANY;
    int32_t *col = buf && buf_bytes >= tsr_cols_bytes(m->k, 1) && !((uintptr_t)buf & 3) ? buf : NULL;
    if (mode == TSR_RQ_HU)
        fc_hu(m, x, in_off, out, col);
    else if (mode == TSR_RQ_TFLX)
        fc_tflx(m, x, in_off, out, col);
    else if (mode == TSR_RQ_K64)
        fc_k64(m, x, in_off, out, col);
    else
        fc_any(m, x, in_off, out, col);
}
