/*
 * conv2d (PULP-NN's pulp_nn_conv): HWC input tile, weights
 * [out_c][kh][kw][in_c], HWC output.
 *
 * Work split: output pixels (rows, in raster order) per core, or output
 * channels in fours when that is more even (pnn_split). Each core unrolls the receptive fields of two output
 * pixels into its own im2col buffer (scratch, 2 * kh * kw * in_c bytes per
 * core; padding stored as -input_offset so the matmul needs no bounds
 * checks), then runs the 4x2 matmul over its output channels. Without that
 * scratch, or with an offset im2col cannot store, a direct loop computes the
 * same values.
 *
 * Compiled again as conv_chw.c with CV_CHW (pnn_conv2d_chw: the output
 * tile channel-major, [out_c][out_h][out_w], for a 3x3 depthwise reading
 * it as planes: docs/gvsoc.md, "First convolution channel-major"), so
 * that conv.o stays as it was.
 */
#include <string.h>

#include "pnn_common.h"
#include "tessera/pulp_nn.h"

/* Output pixels [p0, p1) (raster order), channels [c0, c1), summing the
 * valid part of each window directly. */
static void conv_direct(const tsr_conv_args_t *a, int32_t p0, int32_t p1, int32_t c0, int32_t c1)
{
    const int32_t in_c = a->in_c, kh = a->kh, kw = a->kw, off = a->input_offset;
    int32_t p, co, ky, kx, ci;
    pnn_rq_t rq = {0};
#ifdef CV_CHW
    const size_t P = (size_t)a->out_h * a->out_w;
#endif
    for (p = p0; p < p1; p++) {
        int32_t oy = p / a->out_w, ox = p % a->out_w;
        int32_t iy0 = oy * a->sh - a->pad_t, ix0 = ox * a->sw - a->pad_l, ky0, ky1, kx0, kx1;
#ifndef CV_CHW
        size_t o = (size_t)p * a->out_c;
#endif
        tsr_window(iy0, kh, a->in_h, &ky0, &ky1);
        tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
        for (co = c0; co < c1; co++) {
            int32_t acc = a->bias ? a->bias[co] : 0;
            for (ky = ky0; ky < ky1; ky++)
                for (kx = kx0; kx < kx1; kx++) {
                    const int8_t *x = a->in + ((size_t)(iy0 + ky) * a->in_w + (ix0 + kx)) * in_c;
                    const int8_t *w = a->weights + (((size_t)co * kh + ky) * kw + kx) * in_c;
                    for (ci = 0; ci < in_c; ci++)
                        PNN_MAC(acc, x[ci] + off, w[ci]);
                }
            if (a->rq)
                rq = pnn_rq_channel(a->rq, co);
#ifdef CV_CHW
            pnn_store(a->out, (size_t)co * P + p, acc, &rq, a->rq);
#else
            pnn_store(a->out, o + co, acc, &rq, a->rq);
#endif
        }
    }
}

#ifdef TSR_ISA_XPULPV2
#include "rq32.h"
#include "xpulp.h"

/*
 * The Xpulp path. Each core first writes, for its channels, the blocks'
 * records (biases with the offset's share, the requantization constants:
 * xp_rec4_t) and, when the patch is not whole words (a first layer's
 * 3x3x3), a copy of the weights in rows of K4 bytes (the patch padded with
 * zeros to a multiple of 4: every K loop whole aligned words). Then per
 * pair of output pixels: both windows unrolled into K4-byte rows (padding
 * -off, the last K4 - patch bytes zero), and one asm block of nested
 * hardware loops, loop 1 over the 4-channel blocks, loop 0 over K4 / 4
 * (XP_K4X2), with the requantization and the packed stores of each block
 * (XP_RQ8). Compact enough for the cluster core's 512-byte L0 instruction
 * cache (the im2col by memcpy/memset calls plus the general matmul ran at
 * about 0.1 MAC/cycle per core on the first layer).
 */

/* scratch bytes per core this path needs for nc channels: two windows of
 * K4 bytes, each with 4 bytes of room for the window copy's overrun */
static inline int32_t cv_bytes(int32_t patch, int32_t nc)
{
    const int32_t K4 = (patch + 3) & ~3;
    return 3 + 2 * (K4 + 4) + ((patch & 3) ? nc * K4 : 0) + (nc >> 2) * (int32_t)sizeof(xp_rec4_t);
}

/* Two windows inside the tile into col0 and col1 (K4 + 4 bytes apart):
 * loop 1 over the kh window rows, loop 0 over each row's bytes in whole
 * words (the last word of a row reads up to 3 bytes past it and writes
 * them where the next row then goes; the last row's go into the window's
 * padding, cleared by `mask`, and the 4 bytes of room after it) */
static inline void cv_im2col2(const int8_t *s0, const int8_t *s1, int8_t *col0, int8_t *col1, int32_t kh,
                              int32_t row, int32_t in_row, int32_t K4, uint32_t mask)
{
    const int32_t nw = (row + 3) >> 2;
    int8_t *d0 = col0, *d1 = col1;
    __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t.Lcw_set%=:\n\t"
                     ".insn i 0x7B, 4, x1, %[kh], 18\n\t"
                     ".insn i 0x7B, 4, x0, %[nw], 8\n\t"
                     XP_LW_INC("t0", "%[s0]") XP_LW_INC("t1", "%[s1]") XP_SW_INC4("t0", "%[d0]")
                     XP_SW_INC4("t1", "%[d1]")
                     "add %[s0], %[s0], %[rs]\n\tadd %[s1], %[s1], %[rs]\n\tadd %[d0], %[d0], %[ds]\n\t"
                     ".Lcw_end%=:\n\tadd %[d1], %[d1], %[ds]\n\t"
                     ".if .Lcw_end%= - .Lcw_set%= != 4 * 9\n\t.error \"hardware loop length\"\n\t.endif\n\t"
                     ".option pop"
                     : [s0] "+r"(s0), [s1] "+r"(s1), [d0] "+r"(d0), [d1] "+r"(d1)
                     : [kh] "r"(kh), [nw] "r"(nw), [rs] "r"(in_row - 4 * nw), [ds] "r"(row - 4 * nw)
                     : "t0", "t1", "memory");
    *(uint32_t *)(col0 + K4 - 4) &= mask;
    *(uint32_t *)(col1 + K4 - 4) &= mask;
}

/* The window of output pixel (oy, ox) into col: K4 bytes, padding -off,
 * the last K4 - patch bytes zero. */
static inline void cv_im2col(const tsr_conv_args_t *a, int32_t oy, int32_t ox, int8_t *col, int32_t K4,
                             int8_t pad)
{
    /* the fields as locals: the byte stores would make GCC reload them */
    const int32_t in_c = a->in_c, kw = a->kw, kh = a->kh, in_h = a->in_h, in_w = a->in_w;
    const int32_t iy0 = oy * a->sh - a->pad_t, ix0 = ox * a->sw - a->pad_l, row = kw * in_c;
    const size_t in_row = (size_t)in_w * in_c;
    const int8_t *src = a->in + ((size_t)iy0 * in_w + ix0) * in_c;
    int32_t kx0, kx1, ky, k;
    int8_t *end = col + K4;
    tsr_window(ix0, kw, in_w, &kx0, &kx1);
    if (iy0 >= 0 && iy0 + kh <= in_h && kx0 == 0 && kx1 == kw) {
        /* inside the tile (the usual case): each window row one run,
         * copied by words at any alignment */
        for (ky = 0; ky < kh; ky++, col += row, src += in_row) {
            for (k = 0; k + 4 <= row; k += 4)
                xp_sw(col + k, xp_lw(src + k));
            for (; k < row; k++)
                col[k] = src[k];
        }
    } else {
        for (ky = 0; ky < kh; ky++, col += row, src += in_row) {
            const int32_t iy = iy0 + ky;
            if (iy < 0 || iy >= in_h || kx0 >= kx1) {
                for (k = 0; k < row; k++)
                    col[k] = pad;
                continue;
            }
            for (k = 0; k < kx0 * in_c; k++)
                col[k] = pad;
            xp_gather(col + k, src + k, 1, (kx1 - kx0) * in_c);
            for (k = kx1 * in_c; k < row; k++)
                col[k] = pad;
        }
    }
    while (col < end)
        *col++ = 0;
}

/* a 4-channel block's sums of the two windows (col0, col1) into s2..s9: the
 * channels' weights from q3 (rows K bytes apart; q3 steps to the next
 * block), the biases from the record, 14 set-up, lp.setup, loop 0 */
#define CV_BLOCK_SUMS                                                                                   \
    "mv s10, %[q3]\n\tadd s11, s10, %[K]\n\tadd t5, s11, %[K]\n\tadd %[q3], t5, %[K]\n\t" \
    "mv t4, %[x0]\n\tmv t6, %[x1]\n\t"                                                     \
    "lw s2, 0(%[rec])\n\tlw s4, 4(%[rec])\n\tlw s6, 8(%[rec])\n\tlw s8, 12(%[rec])\n\t"   \
    "mv s3, s2\n\tmv s5, s4\n\tmv s7, s6\n\tmv s9, s8\n\t"                               \
    ".insn i 0x7B, 4, x0, %[n], 28\n\t"                                                    \
    XP_K4X2("t4", "t6", "s10", "s11", "t5", "%[q3]")

/* loop 1's body: 14 set-up, lp.setup, 14 in loop 0, 28 of requantization,
 * the clamp, 4 packs, the record step, 2 stores */
#define CV_OUTER(clamp_len) (14 + 1 + 14 + 28 + (clamp_len) + 4 + 3)
#define CV_BLOCKS(Y0, CLAMP, CLAMP_LEN)                                                                     \
    __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t.Lcv_set%=:\n\t"             \
                     ".insn i 0x7B, 4, x1, %[nb], " XP_XSTR(2 * CV_OUTER(CLAMP_LEN)) "\n\t"                 \
                     CV_BLOCK_SUMS                                                                         \
                     XP_RQ8("%[rec]") CLAMP XP_PACK8                                                     \
                     "addi %[rec], %[rec], 72\n\t"                                                        \
                     XP_SW_INC4("t0", "%[y0]") ".Lcv_end%=:\n\t" XP_SW_INC4("t1", "%[y1]")                 \
                     ".if .Lcv_end%= - .Lcv_set%= != 4 * " XP_XSTR(CV_OUTER(CLAMP_LEN)) "\n\t"                \
                     ".error \"hardware loop length\"\n\t.endif\n\t.option pop"                               \
                     : [q3] "+r"(q3), [rec] "+r"(rp), [y0] "+r"(Y0), [y1] "+r"(y1)                       \
                     : [nb] "r"(nb), [n] "r"(n), [K] "r"(K4), [x0] "r"(col0), [x1] "r"(col1)              \
                     : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "s2", "s3", "s4", "s5", "s6", "s7", "s8",    \
                       "s9", "s10", "s11", "memory")

#ifdef CV_CHW
/* The same storing channel-major: each channel's two pixels packed into a
 * halfword (pv.packlo.b) and stored in its plane, P bytes on (p.sh with a
 * register post-increment): two instructions more a block than the two
 * words of HWC pixels; y ends the loop nb * 4 * P bytes on. */
#define CV_OUTER_CHW(clamp_len) (14 + 1 + 14 + 28 + (clamp_len) + 4 + 1 + 4)
#define CV_BLOCKS_CHW(CLAMP, CLAMP_LEN)                                                                     \
    __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t.Lcvc_set%=:\n\t"            \
                     ".insn i 0x7B, 4, x1, %[nb], " XP_XSTR(2 * CV_OUTER_CHW(CLAMP_LEN)) "\n\t"             \
                     CV_BLOCK_SUMS                                                                         \
                     XP_RQ8("%[rec]") CLAMP                                                              \
                     XP_PACK8_CHW                                                                        \
                     "addi %[rec], %[rec], 72\n\t"                                                        \
                     XP_SH_RR_INC("t0", "%[y]", "%[P]") XP_SH_RR_INC("t1", "%[y]", "%[P]")                  \
                     XP_SH_RR_INC("t2", "%[y]", "%[P]") ".Lcvc_end%=:\n\t" XP_SH_RR_INC("t3", "%[y]", "%[P]") \
                     ".if .Lcvc_end%= - .Lcvc_set%= != 4 * " XP_XSTR(CV_OUTER_CHW(CLAMP_LEN)) "\n\t"          \
                     ".error \"hardware loop length\"\n\t.endif\n\t.option pop"                               \
                     : [q3] "+r"(q3), [rec] "+r"(rp), [y] "+r"(y)                                        \
                     : [nb] "r"(nb), [n] "r"(n), [K] "r"(K4), [x0] "r"(col0), [x1] "r"(col1), [P] "r"(P)   \
                     : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "s2", "s3", "s4", "s5", "s6", "s7", "s8",    \
                       "s9", "s10", "s11", "memory")
#endif

/* The layout of a core's scratch (cv_bytes) and what every pair needs. */
typedef struct {
    int8_t *col0, *col1;
    const int8_t *wbase;      /* the weights of the core's first channel, rows of K4 bytes */
    const xp_rec4_t *rec;     /* a record per 4-channel block */
    int32_t K4, nb;
    uint32_t mask;            /* a window's last word: the patch's bytes kept, the padding cleared */
} cv_plan_t;

/* The two windows of output pixels (oy, ox0) and (oy, ox1) into col0 and
 * col1: both inside the tile (the usual case) in one asm block, else
 * byte by byte with the padding (out of line: the hot loop stays small). */
static __attribute__((noinline)) void cv_border(const tsr_conv_args_t *a, int32_t oy, int32_t ox0, int32_t ox1,
                                                const cv_plan_t *pl)
{
    cv_im2col(a, oy, ox0, pl->col0, pl->K4, (int8_t)-a->input_offset);
    cv_im2col(a, oy, ox1, pl->col1, pl->K4, (int8_t)-a->input_offset);
}

/* a row function's head (CV_ROW, either layout): its arguments, the
 * window's numbers; CV_ROW_PAIRS: the pairs (x, x + 1) inside the tile,
 * xa <= x, x + 1 < xb */
#define CV_ROW_HEAD(NAME)                                                                               \
    static __attribute__((noinline)) void NAME(const tsr_conv_args_t *a, int32_t oy, int32_t x, int32_t xe,      \
                                               int32_t c0, const cv_plan_t *pl)                            \
    {                                                                                                      \
        const int32_t in_c = a->in_c, kw = a->kw, sw = a->sw, in_row = a->in_w * in_c, K4 = pl->K4;        \
        const int32_t iy = oy * a->sh - a->pad_t, row = kw * in_c, n = K4 >> 2, nb = pl->nb, pl_ = a->pad_l;
#define CV_ROW_PAIRS                                                                                    \
    int32_t xa = (pl_ + sw - 1) / sw, xb = (a->in_w - kw + pl_) / sw + 1;                                   \
    if (iy < 0 || iy + kh > a->in_h)                                                                       \
        xa = xb = xe;                                                                                      \
    if (xb > xe)                                                                                           \
        xb = xe;

#ifdef CV_CHW
/* Output pixels [x, xe) of output row oy stored channel-major, in pairs as
 * the HWC rows below. A last single pixel cannot take its window twice
 * (the halfword would write pixel x + 1, the next row's or another
 * core's): it takes the pair (x - 1, x) instead (x - 1 is this core's,
 * written again with the same values), or, alone on its row, the direct
 * loop. */
#define CV_ROW(NAME, CLAMP, CLAMP_LEN)                                                                  \
    CV_ROW_HEAD(NAME)                                                                                     \
        const int32_t kh = a->kh, step = sw * in_c, P = a->out_h * a->out_w, xs = x;                      \
        const uint32_t mask = pl->mask;                                                                    \
        int8_t *col0 = pl->col0, *col1 = pl->col1;                                                         \
        int8_t *yrow = (int8_t *)a->out + (size_t)c0 * P + (size_t)oy * a->out_w;                          \
        CV_ROW_PAIRS                                                                                       \
        while (x < xe) {                                                                                   \
            if (x >= xa && x + 1 < xb) {                                                                   \
                const int8_t *w0 = a->in + iy * in_row + (x * sw - pl_) * in_c;                            \
                for (; x + 1 < xb; x += 2, w0 += 2 * step) {                                               \
                    int8_t *y = yrow + x;                                                                  \
                    const int8_t *q3 = pl->wbase;                                                          \
                    const xp_rec4_t *rp = pl->rec;                                                         \
                    cv_im2col2(w0, w0 + step, col0, col1, kh, row, in_row, K4, mask);                      \
                    CV_BLOCKS_CHW(CLAMP, CLAMP_LEN);                                                       \
                }                                                                                          \
            } else {                                                                                       \
                const int32_t x0 = x + 1 < xe ? x : x - 1;                                                 \
                int8_t *y = yrow + x0;                                                                     \
                const int8_t *q3 = pl->wbase;                                                              \
                const xp_rec4_t *rp = pl->rec;                                                             \
                if (x0 < xs) {                                                                             \
                    const int32_t p = oy * a->out_w + x;                                                   \
                    conv_direct(a, p, p + 1, c0, c0 + 4 * nb);                                             \
                    break;                                                                                 \
                }                                                                                          \
                cv_border(a, oy, x0, x0 + 1, pl);                                                          \
                CV_BLOCKS_CHW(CLAMP, CLAMP_LEN);                                                           \
                x += 2;                                                                                    \
            }                                                                                              \
        }                                                                                                  \
    }
#else
/* Output pixels [x, xe) of output row oy, in pairs (a last single pixel:
 * its window twice, the outputs stored over each other): the pairs whose
 * windows are inside the tile walk their pointers, the others take
 * cv_border. */
#define CV_ROW(NAME, CLAMP, CLAMP_LEN)                                                                  \
    CV_ROW_HEAD(NAME)                                                                                     \
        const int32_t out_c = a->out_c, kh = a->kh, step = sw * in_c;                                      \
        const uint32_t mask = pl->mask;                                                                    \
        int8_t *col0 = pl->col0, *col1 = pl->col1;                                                         \
        CV_ROW_PAIRS                                                                                       \
        while (x < xe) {                                                                                   \
            int8_t *y0 = (int8_t *)a->out + ((size_t)oy * a->out_w + x) * out_c + c0;                      \
            if (x >= xa && x + 1 < xb) {                                                                   \
                const int8_t *w0 = a->in + iy * in_row + (x * sw - pl_) * in_c;                            \
                for (; x + 1 < xb; x += 2, w0 += 2 * step, y0 += 2 * out_c) {                              \
                    int8_t *y0_ = y0, *y1 = y0 + out_c;                                                    \
                    const int8_t *q3 = pl->wbase;                                                          \
                    const xp_rec4_t *rp = pl->rec;                                                         \
                    cv_im2col2(w0, w0 + step, col0, col1, kh, row, in_row, K4, mask);                      \
                    CV_BLOCKS(y0_, CLAMP, CLAMP_LEN);                                                      \
                }                                                                                          \
            } else {                                                                                       \
                const int32_t x1 = x + 1 < xe ? x + 1 : x;                                                 \
                int8_t *y1 = y0 + (x1 - x) * out_c;                                                        \
                const int8_t *q3 = pl->wbase;                                                              \
                const xp_rec4_t *rp = pl->rec;                                                             \
                cv_border(a, oy, x, x1, pl);                                                               \
                CV_BLOCKS(y0, CLAMP, CLAMP_LEN);                                                           \
                x += 2;                                                                                    \
            }                                                                                              \
        }                                                                                                  \
    }
#endif
CV_ROW(cv_row_clip8, XP_CLIP8X8, XP_CLIP8X8_LEN)
CV_ROW(cv_row_minmax, XP_MINMAX8("%[rec]"), XP_MINMAX8_LEN)

/* Pixels [p, p_end) x channels [c0, c1) (c1 - c0 a multiple of 4, whole
 * output words); 0 when a channel needs the general requantization
 * (nothing computed). */
static __attribute__((noinline, optimize("no-tree-loop-distribute-patterns"))) int
conv_xpulp(const tsr_conv_args_t *a, int32_t p, int32_t p_end, int32_t c0, int32_t c1, int8_t *s)
{
    const int32_t patch = a->kh * a->kw * a->in_c, K4 = (patch + 3) & ~3, ow = a->out_w;
    int8_t *col0 = (int8_t *)(((uintptr_t)s + 3) & ~(uintptr_t)3), *col1 = col0 + K4 + 4;
    int8_t *wcopy = col1 + K4 + 4;
    xp_rec4_t *rec = (xp_rec4_t *)(wcopy + ((patch & 3) ? (c1 - c0) * K4 : 0));
    const int ok = xp_rq_usual(a->rq);
    cv_plan_t pl;
    int32_t c, k;
    for (c = c0; c < c1; c += 4)
        if (!pnn_xp_record4(a, c, patch, ok, &rec[(c - c0) >> 2]) || rec[(c - c0) >> 2].lo != rec->lo
            || rec[(c - c0) >> 2].hi != rec->hi)
            return 0;
    if (patch & 3)
        for (c = c0; c < c1; c++) {
            const int8_t *w = a->weights + (size_t)c * patch;
            int8_t *d = wcopy + (c - c0) * K4;
            for (k = 0; k + 4 <= patch; k += 4)
                *(uint32_t *)(d + k) = xp_lw(w + k);
            /* the last whole word: the patch's last bytes, then zeros */
            *(uint32_t *)(d + k) = xp_lw(w + k) & (0xFFFFFFFFu >> (8 * (4 - (patch & 3))));
        }
    pl.col0 = col0, pl.col1 = col1, pl.rec = rec, pl.K4 = K4, pl.nb = (c1 - c0) >> 2;
    pl.wbase = (patch & 3) ? wcopy : a->weights + (size_t)c0 * patch;
    pl.mask = 0xFFFFFFFFu >> (8 * (K4 - patch));
    /* row by row: pairs never straddle two output rows */
    while (p < p_end) {
        const int32_t oy = p / ow, x = p % ow, xe = p_end - (p - x) < ow ? p_end - (p - x) : ow;
        if (rec->lo == -128 && rec->hi == 127)
            cv_row_clip8(a, oy, x, xe, c0, &pl);
        else
            cv_row_minmax(a, oy, x, xe, c0, &pl);
        p += xe - x;
    }
    return 1;
}
#endif

#ifdef CV_CHW
/* The Xpulp path where its conditions hold (pnn_conv2d's), else the direct
 * loop: neither the portable im2col's pnn_matmul nor its pixel pairs
 * store channel-major. */
void pnn_conv2d_chw(const tsr_conv_args_t *a, int core, int ncores)
{
    int32_t p, p_end, c0, c1;

    pnn_split(a->out_h * a->out_w, a->out_c, 2, 4, 0, core, ncores, &p, &p_end, &c0, &c1);
    if (p >= p_end || c0 >= c1)
        return;
#ifdef TSR_ISA_XPULPV2
    {
        const int32_t patch = a->kh * a->kw * a->in_c;
        if (a->scratch && pnn_offset_padable(a->input_offset) && ((c1 - c0) & 3) == 0
            && ((a->out_c | c0) & 3) == 0 && patch >= 4 && a->scratch_bytes >= cv_bytes(patch, c1 - c0)
            && conv_xpulp(a, p, p_end, c0, c1, a->scratch + (size_t)core * (size_t)a->scratch_bytes))
            return;
    }
#endif
    conv_direct(a, p, p_end, c0, c1);
}
#else
void pnn_conv2d(const tsr_conv_args_t *a, int core, int ncores)
{
    const int32_t patch = a->kh * a->kw * a->in_c, off = a->input_offset;
    const int32_t ow = a->out_w;
    int32_t p, p_end, c0, c1;
    int8_t *col0, *col1;

    pnn_split(a->out_h * ow, a->out_c, 2, 4, 0, core, ncores, &p, &p_end, &c0, &c1);
    if (p >= p_end || c0 >= c1)
        return;
    if (!a->scratch || a->scratch_bytes < 2 * patch || !pnn_offset_padable(off)) {
        conv_direct(a, p, p_end, c0, c1);
        return;
    }
    col0 = a->scratch + (size_t)core * (size_t)a->scratch_bytes;
#ifdef TSR_ISA_XPULPV2
    if (((c1 - c0) & 3) == 0 && ((a->out_c | c0) & 3) == 0 && ((uintptr_t)a->out & 3) == 0 && patch >= 4
        && a->scratch_bytes >= cv_bytes(patch, c1 - c0) && conv_xpulp(a, p, p_end, c0, c1, col0))
        return;
#endif
    col1 = col0 + patch;
    /* two pixels at a time in raster order (a pair may straddle two rows) */
    for (; p + 1 < p_end; p += 2) {
        tsr_im2col_pixel(a, p / ow, p % ow, col0, (int8_t)-off);
        tsr_im2col_pixel(a, (p + 1) / ow, (p + 1) % ow, col1, (int8_t)-off);
        pnn_matmul(col0, col1, patch, a->weights, a->bias, c0, c1, off, a->out,
                   (size_t)p * a->out_c, (size_t)(p + 1) * a->out_c, a->rq);
    }
    if (p < p_end) {
        tsr_im2col_pixel(a, p / ow, p % ow, col0, (int8_t)-off);
        pnn_matmul(col0, NULL, patch, a->weights, a->bias, c0, c1, off, a->out,
                   (size_t)p * a->out_c, 0, a->rq);
    }
}
#endif
