/*
 * depthwise conv: HWC input tile [in_h][in_w][C], weights [c][kh][kw],
 * output HWC.
 *
 * Work split: channels per core. For each channel and output column the
 * core copies the kw-wide vertical stripe of the input the column's
 * windows read, top to bottom with its padding, into its own scratch (the
 * "vertical im2col" of DORY's hybrid scheme, which has the DMA bring the
 * tile in CHW order; here the cores gather the channel out of the HWC tile
 * in L1 as they copy: a byte-wise CHW DMA gather cost more than the
 * arithmetic). Every window of the column is then kh * kw contiguous
 * bytes, in the weights' [kh][kw] order, and an output is one dot product
 * of that length. Scratch per core: (in_h + pad_t + pad_b) * kw bytes.
 * Padding is stored as -input_offset (see pnn_offset_padable); without the
 * scratch, or with an offset that cannot be stored, a direct loop computes
 * the same values.
 *
 * 3x3 windows (the common case) keep the weights in registers and fold
 * the offset's share, off * sum(w), into the bias (padding holds -off, so
 * it still adds nothing); with Xpulpv2 (TSR_ISA_XPULPV2) a window is two
 * 4-byte SIMD dot products and one p.mac, requantized in 32 bits.
 *
 * With Xpulpv2 and a 3x3 window, a larger scratch (library.yaml's ring and
 * plane terms) takes the paths further down instead: a channel's padded
 * plane (or a ring of three of its rows) gathered once, and hardware loops
 * of three SIMD dot products per output.
 *
 * depthwise_chw.c compiles this file again with DW_CHW 1: pnn_depthwise_chw,
 * the same kernel on a channel-major input tile ([in_c][in_h][in_w], a
 * channel's rows contiguous), whose planes are copied in words, not
 * gathered byte by byte. A second file, not a flag: the HWC kernels'
 * object stays what it was (the instruction caches are sensitive to it).
 */
#include <string.h>

#include "pnn_common.h"
#include "tessera/pulp_nn.h"
#ifdef TSR_ISA_XPULPV2
#include "rq32.h"
#endif

/* With Xpulp the 3x3 plane loops are the hot code; the paths around them
 * (the direct loop, the stripes, the 1x1) are compiled for size, so that
 * the object, which comes before the pointwise's in the image, does not
 * grow with the plane loops (the instruction caches are sensitive to where
 * the pointwise's loops land: docs/gvsoc.md, depthwise session 11). */
#ifdef TSR_ISA_XPULPV2
#define DW_COLD __attribute__((optimize("Os")))
#else
#define DW_COLD
#endif

/* pixel px = y * in_w + x of channel c is a->in[px * DW_PX(a) + DW_CH(a, c)] */
#ifndef DW_CHW
#define DW_CHW 0
#endif
#if DW_CHW
#define DW_PX(a) 1
#define DW_CH(a, c) ((size_t)(c) * (size_t)((a)->in_h * (a)->in_w))
#else
#define DW_PX(a) (a)->in_c
#define DW_CH(a, c) (c)
#endif

DW_COLD static void depthwise_direct(const tsr_conv_args_t *a, int32_t c0, int32_t c1)
{
    const int32_t C = a->out_c, in_c = DW_PX(a), kh = a->kh, kw = a->kw, off = a->input_offset;
    int32_t c, oy, ox, ky, kx;
    pnn_rq_t rq = {0};
    for (c = c0; c < c1; c++) {
        const int8_t *x = a->in + DW_CH(a, c);
        const int8_t *w = a->weights + (size_t)c * kh * kw;
        if (a->rq)
            rq = pnn_rq_channel(a->rq, c);
        for (oy = 0; oy < a->out_h; oy++) {
            int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
            tsr_window(iy0, kh, a->in_h, &ky0, &ky1);
            for (ox = 0; ox < a->out_w; ox++) {
                int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
                int32_t acc = a->bias ? a->bias[c] : 0;
                tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
                for (ky = ky0; ky < ky1; ky++)
                    for (kx = kx0; kx < kx1; kx++)
                        PNN_MAC(acc, x[((size_t)(iy0 + ky) * a->in_w + ix0 + kx) * in_c] + off,
                                w[ky * kw + kx]);
                pnn_store(a->out, ((size_t)oy * a->out_w + ox) * C + c, acc, &rq, a->rq);
            }
        }
    }
}

/* The kw-wide stripe of channel c for output column ox: rows [0, rows) of
 * the padded input, each kw bytes, padding as pad_value. Padding rows and
 * the rows inside the tile are separate loops, and a 3-wide column fully
 * inside the tile copies its rows without bounds checks (the common case,
 * about a third of a 3x3 layer's time when it had them). */
DW_COLD static void stripe(const tsr_conv_args_t *a, int32_t c, int32_t ox, int32_t rows, int8_t *s,
                   int8_t pad_value)
{
    const int32_t kw = a->kw, in_c = DW_PX(a), ix0 = ox * a->sw - a->pad_l;
    const size_t row_stride = (size_t)a->in_w * in_c;
    int32_t kx0, kx1, y = 0, k, top, end;
    const int8_t *p;
    tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
    top = a->pad_t < rows ? a->pad_t : rows;               /* padding rows above the tile */
    end = a->pad_t + a->in_h < rows ? a->pad_t + a->in_h : rows;   /* rows inside end here */
    for (; y < top; y++, s += kw)
        for (k = 0; k < kw; k++)
            s[k] = pad_value;
    /* channel c of the column's first valid pixel in the tile's first row */
    p = y < end ? a->in + (size_t)(ix0 + kx0) * in_c + DW_CH(a, c) + (size_t)(y - a->pad_t) * row_stride : a->in;
    if (kw == 3 && kx0 == 0 && kx1 == 3) {
        const size_t c2 = 2 * (size_t)in_c;
        for (; y < end; y++, s += 3, p += row_stride) {
            s[0] = p[0];
            s[1] = p[in_c];
            s[2] = p[c2];
        }
    } else {
        for (; y < end; y++, s += kw, p += row_stride) {
            const int8_t *q = p;
            for (k = 0; k < kx0; k++)
                s[k] = pad_value;
            for (; k < kx1; k++, q += in_c)
                s[k] = *q;
            for (; k < kw; k++)
                s[k] = pad_value;
        }
    }
    for (; y < rows; y++, s += kw)
        for (k = 0; k < kw; k++)
            s[k] = pad_value;
}

#ifdef TSR_ISA_XPULPV2
/* One column of a 3x3 channel: the windows start every `step` bytes of the
 * stripe (loads at any alignment), int8 outputs out_stride apart. */
static void column3x3_xpulp(const int8_t *win, const int8_t *w, int32_t b_off, int32_t step, int32_t out_h,
                           int8_t *out, size_t out_stride, const xp_rq_t *q)
{
    const uint32_t w03 = xp_lw(w), w47 = xp_lw(w + 4);
    const int32_t w8 = w[8];
    int32_t oy;
    for (oy = 0; oy < out_h; oy++, win += step, out += out_stride) {
        int32_t acc = xp_sdotsp(b_off, xp_lw(win), w03);
        acc = xp_sdotsp(acc, xp_lw(win + 4), w47);
        acc = xp_mac(acc, win[8], w8);
        *out = xp_rq(acc, q);
    }
}
#endif

#ifdef TSR_ISA_XPULPV2
/*
 * The Xpulp path for 3x3 windows: a ring of three padded input rows of
 * one channel in the core's scratch, each input row gathered out of the
 * HWC tile once (a hardware loop of a strided post-increment byte load and
 * a post-increment store, two instructions per byte), then every output
 * row is one hardware loop of 14 instructions per output: three word loads
 * (one per window row, post-incremented by the stride; the fourth byte
 * meets a zero weight), three SIMD dot products and the 32-bit
 * requantization, stored with a post-increment of out_c bytes. The whole
 * hot path is a few hundred bytes of code, so it stays in the cluster
 * core's 512-byte L0 instruction cache (GVSoC pulp-open: 8 sets x 4 ways
 * x 16 B per core; the stripe path above it did not fit and took about
 * 80 cycles per output on a core, measured on GVSoC).
 */
/* scratch bytes per core the ring needs: three padded rows and the one
 * byte the last word load reads past them */
static inline int32_t ring_bytes(const tsr_conv_args_t *a)
{
    return 3 * (a->in_w + a->pad_l + a->pad_r) + 4;
}

/* One output row of channel c: n outputs, windows at r0/r1/r2 + ox * sw,
 * int8 outputs at o, step out_c. */
static inline void ring_row(const int8_t *r0, const int8_t *r1, const int8_t *r2,
                                               int32_t sw, int32_t n, int8_t *o, int32_t step,
                                               const uint32_t *w, int32_t b, const xp_rq_t *q)
{
    const uint32_t w0 = w[0], w1 = w[1], w2 = w[2];
    const int32_t mul = q->mul, rnd = q->round, sh = q->shift, lo = q->lo, hi = q->hi, zp = q->zero_point;
    if (n <= 0)
        return;
    __asm__ volatile(XP_LOOP("%[n]", 14)
                     XP_LW_RR_INC("t0", "%[r0]", "%[sw]") XP_LW_RR_INC("t1", "%[r1]", "%[sw]")
                     XP_LW_RR_INC("t2", "%[r2]", "%[sw]")
                     "mv t3, %[b]\n\t"
                     XP_SDOTSP("t3", "t0", "%[w0]") XP_SDOTSP("t3", "t1", "%[w1]") XP_SDOTSP("t3", "t2", "%[w2]")
                     "mulh t3, t3, %[mul]\n\t"
                     "add t3, t3, %[rnd]\n\t"
                     "sra t3, t3, %[sh]\n\t"
                     ".insn r 0x33, 6, 0x02, t3, t3, %[lo]\n\t"     /* p.max */
                     ".insn r 0x33, 4, 0x02, t3, t3, %[hi]\n\t"     /* p.min */
                     "add t3, t3, %[zp]\n\t"
                     XP_LOOP_END() XP_SB_RR_INC("t3", "%[o]", "%[st]")
                     XP_LOOP_CHECK(14)
                     : [r0] "+r"(r0), [r1] "+r"(r1), [r2] "+r"(r2), [o] "+r"(o)
                     : [n] "r"(n), [sw] "r"(sw), [st] "r"(step), [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2),
                       [b] "r"(b), [mul] "r"(mul), [rnd] "r"(rnd), [sh] "r"(sh), [lo] "r"(lo), [hi] "r"(hi),
                       [zp] "r"(zp)
                     : "t0", "t1", "t2", "t3", "memory");
}

/* Channels [c0, c1) of a 3x3 layer through the ring (scratch s of
 * ring_bytes); returns the first channel it did not compute (one with the
 * general requantization). The tile's fields are read into locals once:
 * stores through int8_t pointers would make GCC reload them every row. */
/* (no memset calls for the padding bytes: a call out to the C library's
 * code costs instruction-cache refills) */
static __attribute__((noinline, optimize("no-tree-loop-distribute-patterns"))) int32_t
ring_channels(const tsr_conv_args_t *a, int32_t c0, int32_t c1, int8_t *s)
{
    const int32_t in_h = a->in_h, in_w = a->in_w, C = DW_PX(a), out_h = a->out_h, out_w = a->out_w;
    const int32_t out_c = a->out_c, sh = a->sh, sw = a->sw, pt = a->pad_t, pl = a->pad_l, pr = a->pad_r;
    const int32_t W = in_w + pl + pr, off = a->input_offset;
    const size_t row_stride = (size_t)in_w * C, out_row = (size_t)out_w * out_c;
    const int8_t pad = (int8_t)-off;
    int32_t c, k;
    for (c = c0; c < c1; c++) {
        const int8_t *wc = a->weights + (size_t)c * 9;
        uint32_t w[3];
        int32_t b = a->bias ? a->bias[c] : 0, sum = 0, oy, next = -pt, slot = 0;
        int8_t *o = (int8_t *)a->out + c;
        xp_rq_t q;
        if (!xp_rq_channel(a->rq, c, &q))
            break;
        /* window rows as words with a zero fourth byte; the offset's
         * share off * sum(w) joins the bias (padding holds -off: it adds
         * nothing) */
        for (k = 0; k < 3; k++) {
            w[k] = (uint32_t)(uint8_t)wc[3 * k] | (uint32_t)(uint8_t)wc[3 * k + 1] << 8
                   | (uint32_t)(uint8_t)wc[3 * k + 2] << 16;
            sum += wc[3 * k] + wc[3 * k + 1] + wc[3 * k + 2];
        }
        b += off * sum;
        for (oy = 0; oy < out_h; oy++, o += out_row) {
            const int32_t iy0 = oy * sh - pt;
            int32_t s1, s2;
            /* rows come in order; the ring keeps the last three, and
             * `slot` is where the next one goes (so the oldest, iy0, is
             * there) */
            if (next < iy0)
                next = iy0;
            for (; next < iy0 + 3; next++) {
                int8_t *d = s + slot * W;
                slot = slot == 2 ? 0 : slot + 1;
                if (next < 0 || next >= in_h) {
                    for (k = 0; k < W; k++)
                        d[k] = pad;
                    continue;
                }
                for (k = 0; k < pl; k++)
                    d[k] = pad;
                xp_gather(d + pl, a->in + (size_t)next * row_stride + DW_CH(a, c), C, in_w);
                for (k = pl + in_w; k < W; k++)
                    d[k] = pad;
            }
            s1 = slot == 2 ? 0 : slot + 1;
            s2 = s1 == 2 ? 0 : s1 + 1;
            ring_row(s + slot * W, s + s1 * W, s + s2 * W, sw, out_w, o, out_c, w, b, &q);
        }
    }
    return c;
}

/*
 * With room for a channel's whole padded plane in the scratch, the rows
 * need no ring: the plane's border is written with the padding once per
 * call, each channel's interior is gathered row by row, and all of the
 * channel's outputs are one pair of nested hardware loops (rows outside,
 * the 14-instruction output loop inside), so nothing is reloaded per row.
 */
static inline int32_t plane_bytes(const tsr_conv_args_t *a)
{
    return (a->pad_t + a->in_h + a->pad_b) * (a->in_w + a->pad_l + a->pad_r) + 4;
}

/* n bytes of v at d: words between the unaligned ends */
static __attribute__((optimize("no-tree-loop-distribute-patterns"))) void pad_fill(int8_t *d, int32_t n,
                                                                                   int8_t v)
{
    const uint32_t v4 = 0x01010101u * (uint8_t)v;
    int8_t *end = d + n;
    for (; d < end && ((uintptr_t)d & 3); d++)
        *d = v;
    for (; d + 4 <= end; d += 4)
        *(uint32_t *)d = v4;
    for (; d < end; d++)
        *d = v;
}

/* The plane loops (one channel, every output row: loop 1 over the rows,
 * loop 0 along a row). Requantization in three instructions, as the
 * pointwise's (matmul_xpulp.c): mulh, p.addRN with the zero point folded
 * (zs = zp << sh), then the clamp. Operands: the plane's first window row
 * (base), the output (o, step st = out_c), W the padded row, rs the rows'
 * step (sh * W), b the bias with the offset's share, the window rows as
 * words with a zero fourth byte (w0, w1, w2). */
#define DW_CLIP8(r) XP_CLIP8(r)
#define DW_MINMAX(r) XP_MAX(r, r, "%[lo]") XP_MIN(r, r, "%[hi]")

/* any stride: one output per turn of loop 0 (11 or 12 instructions),
 * three word loads post-incremented by the column stride */
#define DW_SINGLE(CLAMP, CLAMP_LEN)                                                                        \
    __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t.Ldws_set%=:\n\t"                 \
                     ".insn i 0x7B, 4, x1, %[nr], " XP_XSTR(2 * (15 + CLAMP_LEN)) "\n\t"                     \
                     "mv t4, %[base]\n\tadd t5, t4, %[W]\n\tadd t6, t5, %[W]\n\t"                            \
                     ".insn i 0x7B, 4, x0, %[nc], " XP_XSTR(2 * (10 + CLAMP_LEN)) "\n\t"                     \
                     XP_LW_RR_INC("t0", "t4", "%[sw]") XP_LW_RR_INC("t1", "t5", "%[sw]")                    \
                     XP_LW_RR_INC("t2", "t6", "%[sw]")                                                      \
                     "mv t3, %[b]\n\t"                                                                       \
                     XP_SDOTSP("t3", "t0", "%[w0]") XP_SDOTSP("t3", "t1", "%[w1]") XP_SDOTSP("t3", "t2", "%[w2]") \
                     "mulh t3, t3, %[mul]\n\t"                                                               \
                     XP_ADDRN("t3", "%[zs]", "%[sh]")                                                        \
                     CLAMP("t3")                                                                             \
                     XP_SB_RR_INC("t3", "%[o]", "%[st]")                                                     \
                     ".Ldws_end%=:\n\tadd %[base], %[base], %[rs]\n\t"                                       \
                     ".if .Ldws_end%= - .Ldws_set%= != 4 * " XP_XSTR((15 + CLAMP_LEN)) "\n\t"                  \
                     ".error \"hardware loop length\"\n\t.endif\n\t.option pop"                               \
                     : [base] "+r"(base), [o] "+r"(o)                                                        \
                     : [nr] "r"(out_h), [nc] "r"(out_w), [W] "r"(W), [sw] "r"(sw), [st] "r"(out_c),         \
                       [rs] "r"(rowstep), [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [b] "r"(b),               \
                       [mul] "r"(q.mul), [sh] "r"(q.shift), [zs] "r"(zs), [lo] "r"(lo), [hi] "r"(hi)         \
                     : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "memory")

/* stride 1, pairs of outputs: one word per window row serves both,
 * (w0, w1, w2, 0) for the first and (0, w0, w1, w2) for the next; 19
 * instructions per pair with mulh (23 without), the full int8 clamp. An
 * odd width ends each row with one output (DW_LAST: 11 or 13
 * instructions, the words where the pairs left the row pointers) instead
 * of taking one output a turn. */
/* The accumulator acc (t3, a7) times the multiplier without mulh (whose 5
 * cycles block the pipeline; mul takes 2, sra and p.mac 1), into t0, t1:
 * the build (tsr_requant_t.split, codegen/libraries/pulp_nn.py dw_split)
 * found one cut K of every channel's multiplier, mul = mh * 2^K + ml * 2^T
 * (its low T bits zero), for which acc * ml and the sums below stay inside
 * 32 bits for every accumulator the channel can reach. Then
 *   t = acc * mh + ((acc * ml) >> (K - T)),  y = (t + (zp << sh2) + 2^(sh2 - 1)) >> sh2,
 * sh2 = shift - K, is tessera's round half up exactly (the 64-bit floor
 * division by 2^(shift - T) done as two; the rounding term is a multiple of
 * 2^K). The asm operands: ml, mh, k = K - T, sh = sh2, zs = zp << sh2. */
/* Without split (0), mulh (mh holds the multiplier, sh and zs mulh's
 * shift and zero point, ml and k are not read): the same operands, so
 * that each loop is one macro with either (the split in the seeded form
 * DW_SPLITB2_OF below, every loop). MULH1: one product (1 instruction),
 * RQ2: two, requantized and clamped (12 or 6). */
#define DW_MULH1(d, acc) "mulh " d ", " acc ", %[mh]\n\t"
#define DW_MULH2 DW_MULH1("t0", "t3") DW_MULH1("t1", "a7")
/* two outputs' requantization, t3 and a7 into t0 and t1, the full int8 clamp */
#define DW_RQ2(MUL2) MUL2 XP_ADDRN("t0", "%[zs]", "%[sh]") XP_ADDRN("t1", "%[zs]", "%[sh]") XP_CLIP8("t0") XP_CLIP8("t1")
#define DW_LAST(MUL1)                                                                                      \
    "lw t0, 0(t4)\n\tlw t1, 0(t5)\n\tlw t2, 0(t6)\n\tmv t3, %[b]\n\t"                                       \
    XP_SDOTSP("t3", "t0", "%[w0]") XP_SDOTSP("t3", "t1", "%[w1]") XP_SDOTSP("t3", "t2", "%[w2]")             \
    MUL1("t0", "t3") XP_ADDRN("t0", "%[zs]", "%[sh]") XP_CLIP8("t0") XP_SB_RR_INC("t0", "%[o]", "%[st]")
/* The split with its products seeded instead of the accumulators (the
 * loops: DW_QUADS, DW_PAIRS_X's, DW_S2PAIRS_X's and DW_S2WORDS' split form): acc = b + dot, and
 *   t = acc * mh + ((acc * ml) >> k) = dot * mh + ((b * ml + dot * ml) >> k) + b * mh,
 * so the window's first product is pv.dotsp (no seed), acc * ml is p.mac
 * on a register seeded with b * ml (mv and p.mac: 2 cycles, as mul alone
 * takes), and b * mh joins the zero point's term: operands b = b * ml,
 * zs = (zp << sh) + b * mh. Every value is the same int32 modulo 2^32 and
 * the sum p.addRN shifts is the same number, which the build's bounds keep
 * inside int32 (b itself is the accumulator of an all-zero window). 1
 * cycle an output less. */
#define DW_DOTSP(rd, rs1, rs2) ".insn r 0x57, 1, 0x4C, " rd ", " rs1 ", " rs2 "\n\t" /* pv.dotsp.b */
#define DW_SPLITB1(d, acc) "mv " d ", %[b]\n\t" XP_MAC(d, acc, "%[ml]") "sra " d ", " d ", %[k]\n\t" XP_MAC(d, acc, "%[mh]")
#define DW_SPLITB2_OF(a0, a1)                                                                              \
    "mv t0, %[b]\n\tmv t1, %[b]\n\t" XP_MAC("t0", a0, "%[ml]") XP_MAC("t1", a1, "%[ml]")                      \
    "sra t0, t0, %[k]\n\tsra t1, t1, %[k]\n\t" XP_MAC("t0", a0, "%[mh]") XP_MAC("t1", a1, "%[mh]")
/* an odd width's last output in the seeded form (13 instructions) */
#define DW_LASTB                                                                                           \
    "lw t0, 0(t4)\n\tlw t1, 0(t5)\n\tlw t2, 0(t6)\n\t"                                                      \
    DW_DOTSP("t3", "t0", "%[w0]") XP_SDOTSP("t3", "t1", "%[w1]") XP_SDOTSP("t3", "t2", "%[w2]")              \
    DW_SPLITB1("t0", "t3") XP_ADDRN("t0", "%[zs]", "%[sh]") XP_CLIP8("t0") XP_SB_RR_INC("t0", "%[o]", "%[st]")
/* a pair's accumulators and first products: seeded with b (mulh) or not (the seeded split) */
#define DW_FIRST_B(x) "mv t3, %[b]\n\tmv a7, %[b]\n\t" XP_SDOTSP("t3", x, "%[w0]") XP_SDOTSP("a7", x, "%[v0]")
#define DW_FIRST_DOT(x) DW_DOTSP("t3", x, "%[w0]") DW_DOTSP("a7", x, "%[v0]")
/* the pair loops' text (NR, NP: the registers of the row and pair counts;
 * FIRST: DW_FIRST_B, or DW_FIRST_DOT with MUL2 DW_SPLITB2_OF, whose 2 more
 * instructions MUL2_LEN leaves out) */
#define DW_PAIRS_BODY(LAST, LAST_LEN, FIRST, MUL2, MUL2_LEN, NR, NP)                                            \
    ".option push\n\t.option norvc\n\t.option norelax\n\t.Ldwp_set%=:\n\t"                                \
    ".insn i 0x7B, 4, x1, " NR ", " XP_XSTR(2 * (22 + MUL2_LEN + LAST_LEN)) "\n\t"                             \
    "mv t4, %[base]\n\tadd t5, t4, %[W]\n\tadd t6, t5, %[W]\n\t"                                               \
    ".insn i 0x7B, 4, x0, " NP ", " XP_XSTR(2 * (17 + MUL2_LEN)) "\n\t"                                          \
    ".insn i 0x0B, 2, t0, 2(t4)\n\t.insn i 0x0B, 2, t1, 2(t5)\n\t.insn i 0x0B, 2, t2, 2(t6)\n\t" \
    FIRST("t0")                                                                             \
    XP_SDOTSP("t3", "t1", "%[w1]") XP_SDOTSP("a7", "t1", "%[v1]")                           \
    XP_SDOTSP("t3", "t2", "%[w2]") XP_SDOTSP("a7", "t2", "%[v2]")                           \
    DW_RQ2(MUL2)                                                                            \
    XP_SB_RR_INC("t0", "%[o]", "%[st]") XP_SB_RR_INC("t1", "%[o]", "%[st]")                 \
    LAST                                                                                    \
    ".Ldwp_end%=:\n\tadd %[base], %[base], %[W]\n\t"                                        \
    ".if .Ldwp_end%= - .Ldwp_set%= != 4 * (22 + " XP_XSTR(MUL2_LEN) " + " XP_XSTR(LAST_LEN) ")\n\t" \
    ".error \"hardware loop length\"\n\t.endif\n\t.option pop"
#define DW_PAIRS_X(LAST, LAST_LEN, FIRST, MUL2, MUL2_LEN)                                                  \
    __asm__ volatile(DW_PAIRS_BODY(LAST, LAST_LEN, FIRST, MUL2, MUL2_LEN, "%[nr]", "%[np]")                 \
                     : [base] "+r"(base), [o] "+r"(o)                                                        \
                     : [nr] "r"(out_h), [np] "r"(out_w >> 1), [W] "r"(W), [st] "r"(out_c),                  \
                       [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [v0] "r"(w0 << 8), [v1] "r"(w1 << 8),        \
                       [v2] "r"(w2 << 8), [b] "r"(bq), [ml] "r"(ml), [mh] "r"(mh), [k] "r"(k), [sh] "r"(sh2),   \
                       [zs] "r"(zq)                                                                         \
                     : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "a7", "memory")
/* SPLIT: tsr_requant_t.split is set (the plane loops below take it or mulh) */
#define DW_PAIRS(SPLIT)                                                                                    \
    do {                                                                                                   \
        if (SPLIT)                                                                                         \
            DW_PAIRS_X("", 0, DW_FIRST_DOT, DW_SPLITB2_OF("t3", "a7"), 6);                                \
        else                                                                                               \
            DW_PAIRS_X("", 0, DW_FIRST_B, DW_MULH2, 2);                                                    \
    } while (0)
/* stride 1, even width, 2x2 blocks: two output rows a turn of loop 1, two
 * columns a turn of loop 0. The four window rows' words serve both rows
 * (4 loads for 4 outputs, not 6), 44 instructions with the split (only); two word registers
 * (each reloaded once its products are done) leave room for the four
 * accumulators. The counts come from memory (registers are short). After a
 * pair of rows o takes o2's place and o2 moves a row on (t0: the step). */
/* the 2x2 blocks' text (NQ, NP: the addresses of the counts) */
#define DW_QUADS_BODY(NQ, NP)                                                                          \
    ".option push\n\t.option norvc\n\t.option norelax\n\tlw t0, " NQ "\n\t.Ldwq4_set%=:\n\t"     \
    ".insn i 0x7B, 4, x1, t0, " XP_XSTR(2 * 54) "\n\t"                                     \
    "mv t4, %[base]\n\tadd t5, t4, %[W]\n\tadd t6, t5, %[W]\n\tadd a5, t6, %[W]\n\t"      \
    "add %[base], t5, %[W]\n\tlw t0, " NP "\n\t"                                             \
    ".insn i 0x7B, 4, x0, t0, " XP_XSTR(2 * 44) "\n\t"                                     \
    ".insn i 0x0B, 2, t0, 2(t4)\n\t.insn i 0x0B, 2, t1, 2(t5)\n\t"                        \
    DW_DOTSP("t3", "t0", "%[w0]") DW_DOTSP("a7", "t0", "%[v0]")                             \
    ".insn i 0x0B, 2, t0, 2(t6)\n\t"                                                        \
    XP_SDOTSP("t3", "t1", "%[w1]") XP_SDOTSP("a7", "t1", "%[v1]")                           \
    DW_DOTSP("a6", "t1", "%[w0]") DW_DOTSP("t2", "t1", "%[v0]")                             \
    ".insn i 0x0B, 2, t1, 2(a5)\n\t"                                                        \
    XP_SDOTSP("t3", "t0", "%[w2]") XP_SDOTSP("a7", "t0", "%[v2]")                           \
    XP_SDOTSP("a6", "t0", "%[w1]") XP_SDOTSP("t2", "t0", "%[v1]")                           \
    XP_SDOTSP("a6", "t1", "%[w2]") XP_SDOTSP("t2", "t1", "%[v2]")                           \
    DW_RQ2(DW_SPLITB2_OF("t3", "a7"))                                                       \
    XP_SB_RR_INC("t0", "%[o]", "%[st]") XP_SB_RR_INC("t1", "%[o]", "%[st]")                 \
    DW_RQ2(DW_SPLITB2_OF("a6", "t2"))                                                       \
    XP_SB_RR_INC("t0", "%[o2]", "%[st]") XP_SB_RR_INC("t1", "%[o2]", "%[st]")               \
    "sub t0, %[o2], %[o]\n\tmv %[o], %[o2]\n\t"                                             \
    ".Ldwq4_end%=:\n\tadd %[o2], %[o2], t0\n\t"                                             \
    ".if .Ldwq4_end%= - .Ldwq4_set%= != 4 * 54\n\t"                                           \
    ".error \"hardware loop length\"\n\t.endif\n\t.option pop"
#define DW_QUADS                                                                                       \
    __asm__ volatile(DW_QUADS_BODY("%[nq]", "%[np]")                                                   \
                     : [base] "+r"(base), [o] "+r"(o), [o2] "+r"(o2)                                         \
                     : [nq] "m"(nq), [np] "m"(np), [W] "r"(W), [st] "r"(out_c), [w0] "r"(w0), [w1] "r"(w1),   \
                       [w2] "r"(w2), [v0] "r"(w0 << 8), [v1] "r"(w1 << 8), [v2] "r"(w2 << 8), [b] "r"(bq),     \
                       [ml] "r"(ml), [mh] "r"(mh), [k] "r"(k), [sh] "r"(sh2), [zs] "r"(zq)                  \
                     : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "a5", "a6", "a7", "memory")
#define DW_PAIRS_LAST(SPLIT)                                                                               \
    do {                                                                                                   \
        if (SPLIT)                                                                                         \
            DW_PAIRS_X(DW_LASTB, 13, DW_FIRST_DOT, DW_SPLITB2_OF("t3", "a7"), 6);                           \
        else                                                                                               \
            DW_PAIRS_X(DW_LAST(DW_MULH1), 11, DW_FIRST_B, DW_MULH2, 2);                                    \
    } while (0)

/* The plane's row stride: the padded row, or with no left padding (the
 * stride-2 layers, tiles inside the map) and room in the scratch, that
 * rounded up to whole words on a word-aligned plane, so the gather stores
 * each row's bytes as aligned words (`quads`) and the window loads at even
 * columns are aligned (the extra columns hold padding no window reads). */
/* At stride 2 one column of left padding is taken too (networks padded on
 * every side): the plane then starts one byte before a word so that its
 * interior rows are word-aligned, and the output loops read each window
 * from the byte before it with the weights one byte up, (0, w0, w1, w2)
 * (`shift`): a stride-2 window's loads are aligned every other column
 * whichever byte they start at, and the copy's stores all are (dw2's
 * 5x64 tiles; not on rows under 16 bytes, where the channel's set-up
 * outweighs the copy: 8x8x256 slower). lead: the bytes skipped at the scratch's start (at least
 * one when shifted, so the first load stays inside it). */
static inline int32_t plane_lead(const int8_t *s, int32_t pl)
{
    return pl ? 1 + (int32_t)((-(uintptr_t)s - 2) & 3) : (int32_t)(-(uintptr_t)s & 3);
}

static inline int32_t plane_quads(const tsr_conv_args_t *a, int32_t scratch, const int8_t *s)
{
    const int32_t W4 = (a->in_w + a->pad_l + a->pad_r + 3) & ~3;
    return (a->pad_l == 0 || (a->pad_l == 1 && a->sw == 2 && a->in_w >= 16)) && a->in_w >= 4 && a->in_h >= 1
           && plane_lead(s, a->pad_l) + (a->pad_t + a->in_h + a->pad_b) * W4 + 4 <= scratch;
}

/* stride 2, pairs of output rows (the full int8 clamp): the two windows
 * of a column share their middle input row, so a pair of outputs takes
 * five word loads, not six, and 21 instructions; loop 1 over the row
 * pairs sets the five row pointers, loop 0 walks the columns. The second
 * row's outputs go through o2; after each pair o takes o2's place and o2
 * moves a row on (np, read once by lp.setup, holds the row's step). */
#define DW_S2PAIRS(SPLIT)                                                                                  \
    do {                                                                                                   \
        if (SPLIT)                                                                                         \
            DW_S2PAIRS_X("", DW_DOTSP, DW_SPLITB2_OF("t3", "a7"), 6);                                      \
        else                                                                                               \
            DW_S2PAIRS_X("mv t3, %[b]\n\tmv a7, %[b]\n\t", XP_SDOTSP, DW_MULH2, 2);                        \
    } while (0)
/* SEED, DOT0: the accumulators' seeds (mulh: b) and first products
 * (pv.dotsp for the seeded split); MUL2_LEN counts MUL2's and SEED's
 * instructions less 2 */
#define DW_S2PAIRS_X(SEED, DOT0, MUL2, MUL2_LEN)                                                           \
    __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t.Ldw2_set%=:\n\t"                 \
                     ".insn i 0x7B, 4, x1, %[np], " XP_XSTR(2 * (29 + MUL2_LEN)) "\n\t"                      \
                     "mv t4, %[base]\n\tadd t5, t4, %[W]\n\tadd t6, t5, %[W]\n\tadd a6, t6, %[W]\n\t"      \
                     "add %[base], a6, %[W]\n\tmv a5, %[base]\n\t"                                         \
                     ".insn i 0x7B, 4, x0, %[nc], " XP_XSTR(2 * (19 + MUL2_LEN)) "\n\t"                      \
                     XP_LW_RR_INC("t0", "t4", "%[sw]") XP_LW_RR_INC("t1", "t5", "%[sw]")                    \
                     XP_LW_RR_INC("t2", "t6", "%[sw]")                                                      \
                     SEED                                                                                    \
                     DOT0("t3", "t0", "%[w0]") XP_SDOTSP("t3", "t1", "%[w1]")                                \
                     XP_LW_RR_INC("t0", "a6", "%[sw]") XP_LW_RR_INC("t1", "a5", "%[sw]")                    \
                     XP_SDOTSP("t3", "t2", "%[w2]") DOT0("a7", "t2", "%[w0]")                                \
                     XP_SDOTSP("a7", "t0", "%[w1]") XP_SDOTSP("a7", "t1", "%[w2]")                           \
                     DW_RQ2(MUL2)                                                                            \
                     XP_SB_RR_INC("t0", "%[o]", "%[st]") XP_SB_RR_INC("t1", "%[o2]", "%[st]")                \
                     "sub %[np], %[o2], %[o]\n\tmv %[o], %[o2]\n\t"                                          \
                     ".Ldw2_end%=:\n\tadd %[o2], %[o2], %[np]\n\t"                                          \
                     ".if .Ldw2_end%= - .Ldw2_set%= != 4 * (29 + " XP_XSTR(MUL2_LEN) ")\n\t"                \
                     ".error \"hardware loop length\"\n\t.endif\n\t.option pop"                               \
                     : [base] "+r"(base), [o] "+r"(o), [o2] "+r"(o2), [np] "+r"(np)                          \
                     : [nc] "r"(out_w), [W] "r"(W), [sw] "r"(sw), [st] "r"(out_c), [w0] "r"(w0),            \
                       [w1] "r"(w1), [w2] "r"(w2), [b] "r"(bq), [ml] "r"(ml), [mh] "r"(mh), [k] "r"(k),     \
                       [sh] "r"(sh2), [zs] "r"(zq)                                                           \
                     : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "a5", "a6", "a7", "memory")

/* stride 2 on the shifted plane (plane_quads with pl 1: interior rows
 * word-aligned) with the split, an even width: aligned word loads only.
 * Word I_j of a window row holds padded columns 4j+1..4j+4: output 2j+1
 * reads its bytes 1-3, (0, w0, w1, w2) = w_r; output 2j byte 3 of I_(j-1)
 * and bytes 0-1 of I_j, (0, 0, 0, w0) = w_r << 16 and (w1, w2, 0, 0) =
 * w_r >> 16. So a turn of loop 0 loads one word per window row (three,
 * aligned, where the row pairs loaded five for two outputs, half
 * misaligned) and gives two outputs of a row: 26 instructions. Output 2j's
 * share of I_(j-1) is summed a turn ahead, into t3 with the bias (the row's
 * first from the left padding column: bl); loop 1 over the output rows, p
 * walks the three rows (W down, back up and a word on), then steps to the
 * next output row by rs, which after the first row takes rskip's value
 * (plane_s2_direct's first row may come from the scratch). */
#define DW_S2WORDS                                                                                         \
    __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\tlw t0, %[nr]\n\t.Ldw2w_set%=:\n\t" \
                     ".insn i 0x7B, 4, x1, t0, " XP_XSTR(2 * 33) "\n\t"                                     \
                     "lw t3, %[bl]\n\tlw t0, %[nc]\n\t"                                                      \
                     ".insn i 0x7B, 4, x0, t0, " XP_XSTR(2 * 26) "\n\t"                                     \
                     XP_LW_RR_INC("t0", "%[p]", "%[W]") XP_LW_RR_INC("t1", "%[p]", "%[W]")                  \
                     XP_LW_RR_INC("t2", "%[p]", "%[back]")                                                  \
                     XP_SDOTSP("t3", "t0", "%[u0]") DW_DOTSP("a7", "t0", "%[w0]")                            \
                     XP_SDOTSP("t3", "t1", "%[u1]") XP_SDOTSP("a7", "t1", "%[w1]")                           \
                     XP_SDOTSP("t3", "t2", "%[u2]") "mv t4, %[b]\n\t" XP_MAC("t4", "t3", "%[ml]")             \
                     XP_SDOTSP("a7", "t2", "%[w2]") "sra t4, t4, %[k]\n\t" XP_MAC("t4", "t3", "%[mh]")         \
                     DW_DOTSP("t3", "t0", "%[e0]") "mv t0, %[b]\n\t" XP_MAC("t0", "a7", "%[ml]")              \
                     XP_SDOTSP("t3", "t1", "%[e1]") XP_SDOTSP("t3", "t2", "%[e2]")                           \
                     XP_ADDRN("t4", "%[zs]", "%[sh]") "sra t0, t0, %[k]\n\t" XP_CLIP8("t4")                  \
                     XP_MAC("t0", "a7", "%[mh]") XP_SB_RR_INC("t4", "%[o]", "%[st]")                         \
                     XP_ADDRN("t0", "%[zs]", "%[sh]") XP_CLIP8("t0")                                        \
                     XP_SB_RR_INC("t0", "%[o]", "%[st]")                                                    \
                     "lw t0, %[rs]\n\tadd %[p], %[p], t0\n\tlw t0, %[rskip]\n\t"                          \
                     ".Ldw2w_end%=:\n\tsw t0, %[rs]\n\t"                                                     \
                     ".if .Ldw2w_end%= - .Ldw2w_set%= != 4 * 33\n\t"                                          \
                     ".error \"hardware loop length\"\n\t.endif\n\t.option pop"                               \
                     : [p] "+r"(p), [o] "+r"(o), [rs] "+m"(rs)                                               \
                     : [nr] "m"(out_h), [nc] "m"(nc), [bl] "m"(bl), [rskip] "m"(rskip), [W] "r"(W),          \
                       [back] "r"(4 - 2 * W), [st] "r"(out_c), [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2),      \
                       [e0] "r"(w0 << 16), [e1] "r"(w1 << 16), [e2] "r"(w2 << 16), [u0] "r"(w0 >> 16),         \
                       [u1] "r"(w1 >> 16), [u2] "r"(w2 >> 16), [b] "r"(bq), [ml] "r"(ml), [mh] "r"(mh),        \
                       [k] "r"(k), [sh] "r"(sh2), [zs] "r"(zq)                                               \
                     : "t0", "t1", "t2", "t3", "t4", "a7", "memory")

/* A channel's rows into the plane's aligned rows: loop 1 over the rows,
 * loop 0 over four bytes packed into a word (1.75 instructions a byte),
 * then the row's last bytes (TAIL: TAIL_LEN instructions of DW_BYTE; a
 * nop without them, so that the loops do not end one instruction apart). */
#define DW_BYTE XP_LBU_RR_INC("t0", "%[src]", "%[C]") XP_SB_INC1("t0", "%[dst]")
#define DW_GATHER_QUADS(TAIL, TAIL_LEN)                                                                   \
    __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t"                             \
                     ".Ldwq_set%=:\n\t.insn i 0x7B, 4, x1, %[nr], " XP_XSTR(2 * (9 + TAIL_LEN)) "\n\t"      \
                     ".insn i 0x7B, 4, x0, %[nq], 14\n\t"                                                     \
                     XP_LBU_RR_INC("t0", "%[src]", "%[C]") XP_LBU_RR_INC("t1", "%[src]", "%[C]")           \
                     XP_LBU_RR_INC("t2", "%[src]", "%[C]") XP_LBU_RR_INC("t3", "%[src]", "%[C]")           \
                     XP_PACKLO("t4", "t1", "t0") XP_PACKHI("t4", "t3", "t2")                               \
                     XP_SW_INC4("t4", "%[dst]")                                                            \
                     TAIL                                                                                  \
                     ".Ldwq_end%=:\n\tadd %[dst], %[dst], %[skip]\n\t"                                     \
                     ".if .Ldwq_end%= - .Ldwq_set%= != 4 * (9 + " XP_XSTR(TAIL_LEN) ")\n\t"                  \
                     ".error \"hardware loop length\"\n\t.endif\n\t.option pop"                              \
                     : [src] "+r"(src), [dst] "+r"(dst)                                                    \
                     : [nr] "r"(in_h), [nq] "r"(in_w >> 2), [C] "r"(C), [skip] "r"(W - in_w)              \
                     : "t0", "t1", "t2", "t3", "t4", "memory")

#if DW_CHW
/* A channel-major (CHW) tile's channel into the plane: its rows are
 * contiguous, so loop 1 over the rows, loop 0 over two words a turn (two
 * loads, then two stores: no load-use stall; 0.5 instructions a byte
 * against the HWC gather's 1.75-2). Each row copies ceil(in_w / 8) * 8
 * bytes, up to 7 past its end, then stores two words of padding there: the
 * row's right padding and the next row's left padding are back, and what
 * it overwrote of the next row's interior that row's copy writes again
 * (the last row's 8 bytes are checked against the scratch). The source
 * reads up to 7 bytes past the channel's plane (the next channel's: not
 * used for the tile's last channel). */
#define DW_CHW_ROWS                                                                                        \
    __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t"                             \
                     ".Ldwc_set%=:\n\t.insn i 0x7B, 4, x1, %[nr], 22\n\t"                                    \
                     "mv t2, %[dst]\n\t"                                                                     \
                     ".insn i 0x7B, 4, x0, %[n8], 8\n\t"                                                      \
                     XP_LW_INC("t0", "%[src]") XP_LW_INC("t1", "%[src]")                                      \
                     XP_SW_INC4("t0", "t2") XP_SW_INC4("t1", "t2")                                          \
                     "add t2, %[dst], %[inw]\n\tsw %[pad4], 0(t2)\n\tsw %[pad4], 4(t2)\n\t"                \
                     "add %[src], %[src], %[back]\n\t"                                                       \
                     ".Ldwc_end%=:\n\tadd %[dst], %[dst], %[W]\n\t"                                          \
                     ".if .Ldwc_end%= - .Ldwc_set%= != 4 * 11\n\t.error \"hardware loop length\"\n\t.endif\n\t" \
                     ".option pop"                                                                            \
                     : [src] "+r"(src), [dst] "+r"(dst)                                                     \
                     : [nr] "r"(in_h), [n8] "r"((in_w + 7) >> 3), [inw] "r"(in_w), [W] "r"(W),              \
                       [back] "r"(in_w - (((in_w + 7) >> 3) << 3)), [pad4] "r"(0x01010101u * (uint8_t)pad)   \
                     : "t0", "t1", "t2", "memory")

/* Rows of whole double words (in_w a multiple of 8) need neither: loop 1
 * over the rows, loop 0 over the double words, then the step to the next
 * row (the nop: the loops must not end one instruction apart). Rows of 8
 * bytes are one loop of four instructions a row, the last store stepping
 * to the next row; rows of 4 two rows a turn (an odd last row apart). */
#define DW_CHW_ROWS8_BODY(NR, N8, SRC, DST, SKIP)                                                          \
    ".option push\n\t.option norvc\n\t.option norelax\n\t"                                                  \
    ".Ldwe_set%=:\n\t.insn i 0x7B, 4, x1, " NR ", 14\n\t"                                                      \
    ".insn i 0x7B, 4, x0, " N8 ", 8\n\t"                                                                        \
    XP_LW_INC("t0", SRC) XP_LW_INC("t1", SRC) XP_SW_INC4("t0", DST) XP_SW_INC4("t1", DST)                      \
    "add " DST ", " DST ", " SKIP "\n\t"                                                                        \
    ".Ldwe_end%=:\n\tnop\n\t"                                                                                  \
    ".if .Ldwe_end%= - .Ldwe_set%= != 4 * 7\n\t.error \"hardware loop length\"\n\t.endif\n\t"                 \
    ".option pop"
#define DW_CHW_ROWS8                                                                                       \
    __asm__ volatile(DW_CHW_ROWS8_BODY("%[nr]", "%[n8]", "%[src]", "%[dst]", "%[skip]")                  \
                     : [src] "+r"(src), [dst] "+r"(dst)                                                     \
                     : [nr] "r"(in_h), [n8] "r"(in_w >> 3), [skip] "r"(W - in_w)                             \
                     : "t0", "t1", "memory")
#define DW_CHW_FLAT(count, step)                                                                               \
    __asm__ volatile(XP_LOOP("%[n]", 4) XP_LW_INC("t0", "%[src]") XP_LW_INC("t1", "%[src]")                   \
                     XP_SW_RR_INC("t0", "%[dst]", "%[a]") XP_LOOP_END() XP_SW_RR_INC("t1", "%[dst]", "%[b]")    \
                     XP_LOOP_CHECK(4)                                                                         \
                     : [src] "+r"(src), [dst] "+r"(dst)                                                     \
                     : [n] "r"(count), [a] "r"(step == 8 ? 4 : W), [b] "r"(step == 8 ? W - 4 : W)               \
                     : "t0", "t1", "memory")

/* CHW rows of any width copied in words (DW_CHW_ROWS): where the last
 * row's 8 bytes fit the scratch, and not for the tile's last channel */
#define DW_CHW_WORDS                                                                                       \
    (in_h > 0 && c + 1 < a->in_c && interior + (in_h - 1) * W + in_w + 8 <= s0 + a->scratch_bytes)

#endif

/* which output loop (plane_channels); DW_S1_SMALL: DW_S1_PAIRS without the
 * 2x2 blocks, for planes under 64 outputs */
/* DW_S2_DIRECT: stride 2 read in place from a channel-major tile
 * (plane_s2_direct) */
enum { DW_ANY, DW_S1_PAIRS, DW_S1_PAIRS_ODD, DW_S2_PAIRS, DW_S1_SMALL, DW_S2_DIRECT };

static inline __attribute__((always_inline)) int32_t plane_body(const tsr_conv_args_t *a, int32_t c0, int32_t c1,
                                                                int8_t *s, const int mode, const int quads)
{
    const int32_t in_h = a->in_h, in_w = a->in_w, C = DW_PX(a), out_h = a->out_h, out_w = a->out_w;
    const int32_t out_c = a->out_c, pt = a->pad_t, pl = a->pad_l;
    const int direct = mode == DW_S2_DIRECT;
    const int32_t W = direct ? in_w : quads ? (in_w + pl + a->pad_r + 3) & ~3 : in_w + pl + a->pad_r;
    const int32_t off = a->input_offset, bytes = (pt + in_h + a->pad_b) * W + 4;
    const int32_t sw = a->sw, rowstep = a->sh * W;
    const size_t row_stride = (size_t)in_w * C;
    const int8_t pad = (int8_t)-off;
    const int32_t lo = a->rq ? a->rq->lo : 0, hi = a->rq ? a->rq->hi : 0;
    const int pairs = mode == DW_S1_PAIRS || mode == DW_S1_SMALL, s2pairs = mode == DW_S2_PAIRS;
    const int shift = (quads && pl == 1) || direct;   /* plane_quads: stride 2 only */
    /* the usual requantization (shifts checked per channel) */
    const int ok = xp_rq_usual(a->rq), per_channel = ok && a->rq->per_channel;
    /* the pair loops requantize without mulh (DW_SPLITB2_OF) when the build
     * set split: the cut K and the multipliers' zero low bits T */
    const int32_t K = ok ? a->rq->split & 255 : 0, T = ok ? a->rq->split >> 8 : 0, k = K - T;
    int8_t *interior;
    int32_t c, iy;
#if DW_CHW
    int8_t *const s0 = s;
#endif
    if (quads)
        s += plane_lead(s, pl);
    interior = s + pt * W + pl;
    /* the border only (the interior is every channel's own): a byte loop
     * over the whole plane cost a third of a one-channel-per-core tile */
    if (direct) {
        /* the padding row above the tile (pad_t 1): the first output
         * row's window rows are it and the channel's first two rows */
        s = (int8_t *)(((uintptr_t)s + 3) & ~(uintptr_t)3);
        if (pt)
            pad_fill(s, in_w, pad);
    } else if (in_h <= 0 || in_w <= 0) {
        pad_fill(s, bytes, pad);
    } else {
        /* between rows only the padding columns: the columns a word-aligned
         * row adds after them are read only by a window's fourth byte,
         * whose weight is 0 */
        const int32_t side = shift ? W - in_w : pl + a->pad_r;
        pad_fill(s, pt * W + pl, pad);
        for (iy = 0; side && iy + 1 < in_h; iy++)
            pad_fill(interior + iy * W + in_w, side, pad);
        pad_fill(interior + (in_h - 1) * W + in_w, bytes - (int32_t)(interior + (in_h - 1) * W + in_w - s), pad);
    }
    if (out_h <= 0 || out_w <= 0)
        return c1;
    for (c = c0; c < c1; c++) {
        const int8_t *wc = a->weights + (size_t)c * 9;
        /* the window rows as words with a zero fourth byte (loads at any
         * alignment; the last reads one byte past the weights, masked) */
        const uint32_t x0 = xp_lw(wc) & 0xFFFFFFu, x1 = xp_lw(wc + 3) & 0xFFFFFFu, x2 = xp_lw(wc + 6) & 0xFFFFFFu;
        const uint32_t w0 = shift ? x0 << 8 : x0, w1 = shift ? x1 << 8 : x1, w2 = shift ? x2 << 8 : x2;
        /* the offset's share, off * sum(w), joins the bias (padding holds
         * -off: it adds nothing) */
        const int32_t b = (a->bias ? a->bias[c] : 0)
                          + off * xp_sdotsp(xp_sdotsp(xp_sdotsp(0, w0, 0x01010101u), w1, 0x01010101u), w2, 0x01010101u);
        const int32_t kc = per_channel ? c : 0, sh = ok ? a->rq->shift[kc] - 32 : 0;
        int8_t *o = (int8_t *)a->out + c, *dst = interior;
        const int8_t *base = s - shift, *src = a->in + DW_CH(a, c);
        int32_t mul, zs, mh, ml, sh2, zs2, bq, zq;
        xp_rq_t q;
        if (sh < 1 || sh > 22)
            break;
        mul = a->rq->mul[kc];
        zs = (int32_t)((uint32_t)a->rq->zero_point << sh);
        q.mul = mul, q.shift = sh;
        mh = mul >> K;   /* K 0: mulh's operands (mh the multiplier) */
        ml = (int32_t)((uint32_t)(mul - (mh << K)) >> T);
        sh2 = K ? sh + 32 - K : sh;
        zs2 = (int32_t)((uint32_t)a->rq->zero_point << sh2);
        /* the split loops' operands: products seeded
         * (DW_SPLITB2_OF: b * ml, and b * mh with the zero point) */
        bq = K ? (int32_t)((uint32_t)b * (uint32_t)ml) : b;
        zq = K ? (int32_t)((uint32_t)zs2 + (uint32_t)b * (uint32_t)mh) : zs2;
        /* the channel's rows into the plane's interior: loop 1 over the
         * rows, loop 0 over byte pairs (two instructions a byte), or on
         * aligned rows over four bytes packed into a word (1.75); CHW
         * rows are copied in words */
#if DW_CHW
        if (direct) {
            /* no plane: only the first output row's two input rows under
             * the padding row, when there is one */
            uint32_t *d = (uint32_t *)(s + in_w);
            const uint32_t *r = (const uint32_t *)src;
            for (iy = 0; pt && iy < in_w >> 1; iy++)
                d[iy] = r[iy];
        } else if (in_w == 8 && in_h > 0) {
            DW_CHW_FLAT(in_h, 8);
        } else if (in_w == 4 && in_h > 0) {
            if (in_h >= 2)
                DW_CHW_FLAT(in_h >> 1, 4);
            if (in_h & 1)
                xp_sw(dst, xp_lw(src));
        } else if ((in_w & 7) == 0 && in_h > 0) {
            DW_CHW_ROWS8;
        } else if (DW_CHW_WORDS) {
            DW_CHW_ROWS;
        } else
#endif
        if (quads) {
            /* the row's last in_w mod 4 bytes in loop 1 */
            switch (in_w & 3) {
            case 0: DW_GATHER_QUADS("nop\n\t", 1); break;
            case 1: DW_GATHER_QUADS(DW_BYTE, 2); break;
            case 2: DW_GATHER_QUADS(DW_BYTE DW_BYTE, 4); break;
            default: DW_GATHER_QUADS(DW_BYTE DW_BYTE DW_BYTE, 6); break;
            }
        } else if (in_w >= 3 && (in_w & 1)) {   /* the row's last byte in the loop too */
            __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t"
                             ".Ldwo_set%=:\n\t.insn i 0x7B, 4, x1, %[nr], 16\n\t"
                             ".insn i 0x7B, 4, x0, %[np], 8\n\t"
                             XP_LBU_RR_INC("t0", "%[src]", "%[C]") XP_LBU_RR_INC("t1", "%[src]", "%[C]")
                             XP_SB_INC1("t0", "%[dst]") XP_SB_INC1("t1", "%[dst]")
                             XP_LBU_RR_INC("t0", "%[src]", "%[C]") XP_SB_INC1("t0", "%[dst]")
                             ".Ldwo_end%=:\n\tadd %[dst], %[dst], %[skip]\n\t"
                             ".if .Ldwo_end%= - .Ldwo_set%= != 4 * 8\n\t.error \"hardware loop length\"\n\t.endif\n\t"
                             ".option pop"
                             : [src] "+r"(src), [dst] "+r"(dst)
                             : [nr] "r"(in_h), [np] "r"(in_w >> 1), [C] "r"(C), [skip] "r"(W - in_w)
                             : "t0", "t1", "memory");
        } else if (in_w >= 2)
            __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t"
                             ".Ldwg_set%=:\n\t.insn i 0x7B, 4, x1, %[nr], 14\n\t"
                             ".insn i 0x7B, 4, x0, %[np], 8\n\t"
                             XP_LBU_RR_INC("t0", "%[src]", "%[C]") XP_LBU_RR_INC("t1", "%[src]", "%[C]")
                             XP_SB_INC1("t0", "%[dst]") XP_SB_INC1("t1", "%[dst]")
                             "add %[dst], %[dst], %[skip]\n\t"
                             ".Ldwg_end%=:\n\tadd %[src], %[src], %[odd]\n\t"
                             ".if .Ldwg_end%= - .Ldwg_set%= != 4 * 7\n\t.error \"hardware loop length\"\n\t.endif\n\t"
                             ".option pop"
                             : [src] "+r"(src), [dst] "+r"(dst)
                             : [nr] "r"(in_h), [np] "r"(in_w >> 1), [C] "r"(C), [skip] "r"(W - (in_w & ~1)),
                               [odd] "r"((in_w & 1) * C)
                             : "t0", "t1", "memory");
        if (!quads && in_w == 1)   /* the one column */
            for (iy = 0; iy < in_h; iy++)
                interior[iy * W + in_w - 1] = a->in[(size_t)iy * row_stride + (size_t)(in_w - 1) * C + DW_CH(a, c)];
        if (mode == DW_S1_PAIRS && K && out_h * out_w >= 64 && out_h >= 2) {
            /* pairs of rows in 2x2 blocks, an odd last row in pairs (not on
             * small planes: measured slower on 4x4) */
            const int32_t nq = out_h >> 1, np = out_w >> 1;
            int8_t *o2 = o + (size_t)out_w * out_c;
            DW_QUADS;
            if (out_h & 1) {
                const int32_t out_h = 1;
                DW_PAIRS(K);
            }
        } else if (pairs)
            DW_PAIRS(K);
        else if (mode == DW_S1_PAIRS_ODD)
            DW_PAIRS_LAST(K);
        else if ((s2pairs && shift && K && !(out_w & 1)) || direct) {
            /* the row's seed: the bias and the left padding column's
             * share of output 0 (w_r's byte 1 times the padding) */
            const uint32_t pad4 = 0x01010101u * (uint8_t)pad;
            const int32_t bl = xp_sdotsp(xp_sdotsp(xp_sdotsp(0, pad4, w0 << 16), pad4, w1 << 16), pad4, w2 << 16);
            const int32_t nc = out_w >> 1, rskip = 2 * W - 4 * nc;
            const int8_t *p = direct ? (pt ? s : src) : s + shift;
            /* the step after the first row: from the scratch to the tile's
             * second window row when the first row is the scratch's */
            int32_t rs = direct && pt ? (int32_t)(src + in_w - (s + 4 * nc)) : rskip;
            DW_S2WORDS;
        } else if (s2pairs && (!quads || out_h >= 2)) {   /* one row: plane_channels sends only quads */
            int8_t *o2 = o + (size_t)out_w * out_c;
            int32_t np = out_h >> 1;
            DW_S2PAIRS(K);
            if (out_h & 1) {   /* the last row */
                const int32_t out_h = 1;
                DW_SINGLE(DW_CLIP8, 1);
            }
        } else if (lo == -128 && hi == 127)
            DW_SINGLE(DW_CLIP8, 1);
        else
            DW_SINGLE(DW_MINMAX, 2);
    }
    return c;
}

/* One copy of the plane loop per output loop and gather (aligned rows or
 * not), each with only its own code: fewer instruction lines to fetch
 * (4x4x256 3x3/1 call: every loop in one function 14,716 cycles, a copy
 * per output loop 14,758, also per gather 14,275). */
#define DW_PLANE_FN(name, mode, quads)                                                                     \
    static __attribute__((noinline, optimize("no-tree-loop-distribute-patterns"))) int32_t name(           \
        const tsr_conv_args_t *a, int32_t c0, int32_t c1, int8_t *s)                                       \
    {                                                                                                      \
        return plane_body(a, c0, c1, s, mode, quads);                                                      \
    }
DW_PLANE_FN(plane_s1_pairs, DW_S1_PAIRS, 0)
/* small planes (dw13's 4x4) without the 2x2 blocks' code: the channel's
 * set-up and its loop in fewer instruction lines */
DW_PLANE_FN(plane_s1_small, DW_S1_SMALL, 0)
DW_PLANE_FN(plane_s1_pairs_odd, DW_S1_PAIRS_ODD, 0)
DW_PLANE_FN(plane_s2_pairs, DW_S2_PAIRS, 0)
DW_PLANE_FN(plane_any, DW_ANY, 0)
#if DW_CHW
/* channel-major rows are copied in words whatever their alignment: no
 * second set of loops for aligned rows (8 kB less code: the CHW object is
 * an addition to pulp_open's 192 kB of code) */
#define plane_s1_pairs_q plane_s1_pairs
#define plane_s1_pairs_odd_q plane_s1_pairs_odd
#define plane_any_q plane_any
/* ... but stride 2 takes the word-aligned rows (plane_quads): the copy's
 * stores aligned, and every window row's loads at even columns every other
 * one aligned (16x16x64 3x3/2 call alone: 14,144 -> 13,521 cycles) */
DW_PLANE_FN(plane_s2_pairs_q, DW_S2_PAIRS, 1)
/* stride 2 with one column of left padding, read in place (DW_S2WORDS
 * never reads that column: its share is in the row's seed), so no plane
 * and no copy; a padding row above takes the first output row from three
 * rows in the scratch. Rows of whole words on a word-aligned tile, no
 * window reaching the right or bottom padding, the split, the int8 clamp. */
DW_PLANE_FN(plane_s2_direct, DW_S2_DIRECT, 0)
static inline int plane_direct(const tsr_conv_args_t *a)
{
    return a->pad_l == 1 && a->pad_t <= 1 && (a->in_w & 3) == 0 && a->in_w >= 4 && (a->out_w & 1) == 0
           && 2 * a->out_w <= a->in_w && 2 * a->out_h - a->pad_t <= a->in_h - 1 && a->out_h >= 1
           && !((uintptr_t)a->in & 3) && (a->rq->split & 255) && xp_rq_usual(a->rq)
           && (!a->pad_t || 3 * a->in_w + 3 <= a->scratch_bytes);
}
#else
DW_PLANE_FN(plane_s1_pairs_q, DW_S1_PAIRS, 1)
DW_PLANE_FN(plane_s1_pairs_odd_q, DW_S1_PAIRS_ODD, 1)
DW_PLANE_FN(plane_s2_pairs_q, DW_S2_PAIRS, 1)
DW_PLANE_FN(plane_any_q, DW_ANY, 1)
#endif

#if DW_CHW
/* Stride 1 on a channel-major tile with the split (plane_channels checks
 * the rest: the full int8 clamp, an even width, rows of a multiple of 8
 * bytes, or of 4 in pairs): the whole channel loop in one asm block. In C, the loops' 27
 * registers left GCC about 105 instructions a channel around them, a third
 * of them spills and reloads (core 0's trace of an 8x8x184 call: 156 cycles
 * a channel, 2.4 an output). Here the channel's pointers and the call's
 * constants sit in a record (r, s0 in the asm); each channel loads its
 * weights, bias, multiplier and shift through it, derives the operands
 * plane_body's loops take (w0..w2, v0..v2, b, mh, ml, sh, zs), copies its
 * rows (DW_CHW_FLAT's or DW_CHW_ROWS8's loops) and runs DW_QUADS' text
 * (and DW_PAIRS' for an odd last row) or DW_PAIRS'. No
 * channel's shift is checked: the build sets split only when every shift
 * is 33-54 (codegen/libraries/pulp_nn.py dw_split), plane_body's range. */
enum { DWL_WC, DWL_BP, DWL_MP, DWL_SHP, DWL_SRC, DWL_O, DWL_N, DWL_OFF, DWL_K,
       DWL_T, DWL_ZP, DWL_DST, DWL_BASE, DWL_LOWK, DWL_NQ, DWL_NP, DWL_NR, DWL_CN, DWL_CA, DWL_CB, DWL_O2, DWL_W,
       DWL_ST, DWL_KT, DWL_ONES, DWL_MASK, DWL_N8, DWL_ODD, DWL_FIELDS };
/* the asm's offsets of those fields (checked below) */
/* (the record in s0 and the temporaries in a0-a5, so that most of the
 * set-up's loads and stores take the 2-byte forms: a channel's loop with
 * 2x2 blocks is 436 bytes of code, not 480, under the core's 512-byte
 * instruction cache; 4x4x256 call 12,146 -> 11,969 cycles) */
#define DWL_SETUP(PRE)                                                                                     \
    "lw a5, 0(s0)\n\tlw %[o], 4(s0)\n\tlw %[base], 8(s0)\n\tlw %[zs], 12(s0)\n\t"                               \
    XP_LW_INCI("t0", "a5", "3") XP_LW_INCI("t5", "a5", "3") XP_LW_INCI("t6", "a5", "3") "lw %[sh], 100(s0)\n\t" \
    XP_LW_INCI("a6", "%[o]", "4") XP_LW_INCI("a7", "%[base]", "4")                                              \
    "and %[w0], t0, %[sh]\n\tand %[w1], t5, %[sh]\n\tand %[w2], t6, %[sh]\n\t" XP_LB_INC1("t0", "%[zs]")        \
    "lw %[sh], 96(s0)\n\tsw a5, 0(s0)\n\tsw %[o], 4(s0)\n\tsw %[base], 8(s0)\n\tsw %[zs], 12(s0)\n\t"           \
    "lw a5, 24(s0)\n\t"                                                                                      \
    DW_DOTSP("t3", "%[w0]", "%[sh]") XP_SDOTSP("t3", "%[w1]", "%[sh]") XP_SDOTSP("t3", "%[w2]", "%[sh]")      \
    "addi a5, a5, -1\n\tlw %[sh], 32(s0)\n\tlw %[zs], 28(s0)\n\tlw %[base], 52(s0)\n\tlw %[o], 36(s0)\n\t"      \
    "sw a5, 24(s0)\n\tmul t3, t3, %[zs]\n\t"                                                                  \
    "sra %[mh], a7, %[sh]\n\tand a7, a7, %[base]\n\tsrl %[ml], a7, %[o]\n\tsub %[sh], t0, %[sh]\n\t"            \
    "lw %[base], 40(s0)\n\t"                                                                                  \
    "slli %[v0], %[w0], 8\n\tslli %[v1], %[w1], 8\n\tslli %[v2], %[w2], 8\n\tadd a6, a6, t3\n\t"               \
    "mul %[b], a6, %[ml]\n\tmul t3, a6, %[mh]\n\tsll %[zs], %[base], %[sh]\n\tadd %[zs], %[zs], t3\n\t"         \
    "lw t2, 16(s0)\n\tlw t3, 44(s0)\n\tlw t4, 68(s0)\n\tlw t5, 72(s0)\n\tlw t6, 76(s0)\n\t"                     \
    "lw a5, 104(s0)\n\tlw %[o], 20(s0)\n\tlw %[base], 48(s0)\n\t" PRE "bnez a5, .Ldwl_r8%=\n\t"               \
    XP_LOOP("t4", 4) XP_LW_INC("t0", "t2") XP_LW_INC("t1", "t2") XP_SW_RR_INC("t0", "t3", "t5")               \
    XP_LOOP_END() XP_SW_RR_INC("t1", "t3", "t6") XP_LOOP_CHECK(4) "\n.Ldwl_cp%=:\n\t"                        \
    "addi t0, %[o], 1\n\tsw t2, 16(s0)\n\tsw t0, 20(s0)\n\t"
/* p.lw rd, imm(rs1!) */
#define XP_LW_INCI(rd, rs1, imm) ".insn i 0x0B, 2, " rd ", " imm "(" rs1 ")\n\t"
/* rows of 8n bytes (n > 1), out of the rows of 8's way: DW_CHW_ROWS8's loops */
#define DWL_ROWS8 ".Ldwl_r8%=:\n\t" DW_CHW_ROWS8_BODY("t4", "a5", "t2", "t3", "t6") "\n\tj .Ldwl_cp%=\n\t"
#define DWL_LOOP(PRE, OUTPUTS, OUTLINE)                                                                                  \
    do {                                                                                                   \
        register int32_t *rr __asm__("s0") = r;                                                           \
        register int32_t W_ __asm__("s10"), st_ __asm__("s9"), k_ __asm__("s8"), w0_ __asm__("s11");        \
        register int32_t w1_ __asm__("s1"), w2_ __asm__("s2"), v0_ __asm__("s3"), v1_ __asm__("s4");       \
        register int32_t v2_ __asm__("s5"), b_ __asm__("s6"), ml_ __asm__("s7"), mh_ __asm__("a0");        \
        register int32_t sh_ __asm__("a1"), zs_ __asm__("a2"), base_ __asm__("a3"), o_ __asm__("a4");      \
        register int32_t o2_ __asm__("ra");                                                                \
        __asm__ volatile("lw %[W], 84(s0)\n\tlw %[st], 88(s0)\n\tlw %[k], 92(s0)\n\t.Ldwl_ch%=:\n\t"   \
                         DWL_SETUP(PRE) OUTPUTS                                                                 \
                         "lw t0, 24(s0)\n\tbnez t0, .Ldwl_ch%=\n\t"                                       \
                         "j .Ldwl_done%=\n\t" DWL_ROWS8 OUTLINE ".Ldwl_done%=:\n\t"                        \
                         : [W] "=&r"(W_), [st] "=&r"(st_), [k] "=&r"(k_), [w0] "=&r"(w0_), [w1] "=&r"(w1_),  \
                           [w2] "=&r"(w2_), [v0] "=&r"(v0_), [v1] "=&r"(v1_), [v2] "=&r"(v2_), [b] "=&r"(b_), \
                           [ml] "=&r"(ml_), [mh] "=&r"(mh_), [sh] "=&r"(sh_), [zs] "=&r"(zs_),              \
                           [base] "=&r"(base_), [o] "=&r"(o_), [o2] "=&r"(o2_)                             \
                         : "r"(rr)                                                                         \
                         : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "a5", "a6", "a7", "memory");           \
    } while (0)

static __attribute__((noinline, optimize("no-tree-loop-distribute-patterns"))) int32_t
plane_s1_lean(const tsr_conv_args_t *a, int32_t c0, int32_t c1, int8_t *s)
{
    const int32_t in_h = a->in_h, in_w = a->in_w, out_h = a->out_h, out_w = a->out_w, out_c = a->out_c;
    const int32_t pt = a->pad_t, pl = a->pad_l, W = in_w + pl + a->pad_r;
    const int32_t off = a->input_offset, bytes = (pt + in_h + a->pad_b) * W + 4;
    const tsr_requant_t *rq = a->rq;
    const int32_t K = rq->split & 255, T = rq->split >> 8;
    int8_t *interior = s + pt * W + pl;
    int32_t r[DWL_FIELDS], iy;
    _Static_assert(DWL_WC * 4 == 0 && DWL_BP * 4 == 4 && DWL_MP * 4 == 8 && DWL_SHP * 4 == 12 &&
                   DWL_SRC * 4 == 16 && DWL_O * 4 == 20 && DWL_N * 4 == 24 && DWL_OFF * 4 == 28 &&
                   DWL_K * 4 == 32 && DWL_T * 4 == 36 && DWL_ZP * 4 == 40 && DWL_DST * 4 == 44 &&
                   DWL_BASE * 4 == 48 && DWL_LOWK * 4 == 52 && DWL_NQ * 4 == 56 && DWL_NP * 4 == 60 &&
                   DWL_NR * 4 == 64 && DWL_CN * 4 == 68 && DWL_CA * 4 == 72 && DWL_CB * 4 == 76 &&
                   DWL_O2 * 4 == 80 && DWL_W * 4 == 84 && DWL_ST * 4 == 88 && DWL_KT * 4 == 92 &&
                   DWL_ONES * 4 == 96 && DWL_MASK * 4 == 100 && DWL_N8 * 4 == 104 && DWL_ODD * 4 == 108,
                   "the asm's record offsets");
    /* the border only (the interior is every channel's own) */
    pad_fill(s, pt * W + pl, (int8_t)-off);
    for (iy = 0; W > in_w && iy + 1 < in_h; iy++)
        pad_fill(interior + iy * W + in_w, W - in_w, (int8_t)-off);
    pad_fill(interior + (in_h - 1) * W + in_w, bytes - (int32_t)(interior + (in_h - 1) * W + in_w - s),
             (int8_t)-off);
    if (c1 <= c0)
        return c1;
    r[DWL_WC] = (int32_t)(uintptr_t)(a->weights + (size_t)c0 * 9);
    r[DWL_BP] = (int32_t)(uintptr_t)(a->bias + c0);
    r[DWL_MP] = (int32_t)(uintptr_t)(rq->mul + c0);
    r[DWL_SHP] = (int32_t)(uintptr_t)(rq->shift + c0);
    r[DWL_SRC] = (int32_t)(uintptr_t)(a->in + (size_t)c0 * (size_t)(in_h * in_w));
    r[DWL_O] = (int32_t)(uintptr_t)((int8_t *)a->out + c0);
    r[DWL_N] = c1 - c0;
    r[DWL_OFF] = off;
    r[DWL_K] = K;
    r[DWL_T] = T;
    r[DWL_ZP] = rq->zero_point;
    r[DWL_DST] = (int32_t)(uintptr_t)interior;
    r[DWL_BASE] = (int32_t)(uintptr_t)s;
    r[DWL_LOWK] = (int32_t)(((uint32_t)1 << K) - 1);
    r[DWL_NQ] = out_h >> 1;
    r[DWL_NP] = out_w >> 1;
    r[DWL_NR] = out_h;
    /* the copy: rows of 8 one a turn, rows of 4 two a turn (DW_CHW_FLAT),
     * rows of 8n in loops over the rows and the double words (N8 = n) */
    r[DWL_CN] = in_w == 4 ? in_h >> 1 : in_h;
    r[DWL_CA] = in_w == 8 ? 4 : W;
    r[DWL_CB] = in_w == 8 ? W - 4 : in_w == 4 ? W : W - in_w;
    r[DWL_N8] = in_w > 8 ? in_w >> 3 : 0;
    r[DWL_ODD] = out_h & 1;
    r[DWL_O2] = out_w * out_c;
    r[DWL_W] = W;
    r[DWL_ST] = out_c;
    r[DWL_KT] = K - T;
    r[DWL_ONES] = 0x01010101;
    r[DWL_MASK] = 0xFFFFFF;
    /* 2x2 blocks, an odd last row in pairs; on small planes too (4x4x256
     * call 12,407 -> 12,146 cycles: unlike plane_body's, 64 outputs a
     * channel are not needed to pay for them) */
    if (out_h >= 2)
        DWL_LOOP("lw %[o2], 80(s0)\n\t", "add %[o2], %[o], %[o2]\n\t" DW_QUADS_BODY("56(s0)", "60(s0)")
                 "\n\tlw a5, 108(s0)\n\tbnez a5, .Ldwl_odd%=\n.Ldwl_even%=:\n\t",
                 /* the odd last row out of the even planes' way */
                 ".Ldwl_odd%=:\n\tlw %[o2], 60(s0)\n\t"
                 DW_PAIRS_BODY("", 0, DW_FIRST_DOT, DW_SPLITB2_OF("t3", "a7"), 6, "a5", "%[o2]") "\n\tj .Ldwl_even%=\n\t");
    else
        DWL_LOOP("lw %[o2], 60(s0)\n\t", "lw a5, 64(s0)\n\t" DW_PAIRS_BODY("", 0, DW_FIRST_DOT, DW_SPLITB2_OF("t3", "a7"), 6, "a5", "%[o2]") "\n\t", "");
    return c1;
}
#endif

static int32_t plane_channels(const tsr_conv_args_t *a, int32_t c0, int32_t c1, int8_t *s)
{
    const int clip8 = a->rq && a->rq->lo == -128 && a->rq->hi == 127;
    const int q = plane_quads(a, a->scratch_bytes, s);
#if DW_CHW
    /* plane_s1_lean: per-channel requantization and a bias (the networks'
     * layers), rows of a multiple of 8 bytes, or of 4 in pairs */
    if (clip8 && a->sw == 1 && a->sh == 1 && (a->out_w & 1) == 0 && a->out_w > 0 && xp_rq_usual(a->rq)
        && (a->rq->split & 255) && a->rq->per_channel && a->bias
        && ((a->in_w > 0 && (a->in_w & 7) == 0 && a->in_h > 0) || (a->in_w == 4 && a->in_h >= 2 && !(a->in_h & 1)))
        && a->out_h > 0)
        return plane_s1_lean(a, c0, c1, s);
#endif
    if (clip8 && a->sw == 1 && a->sh == 1 && (a->out_w & 1) == 0)
        return q ? plane_s1_pairs_q(a, c0, c1, s)
                 : a->out_h * a->out_w < 64 ? plane_s1_small(a, c0, c1, s) : plane_s1_pairs(a, c0, c1, s);
    if (clip8 && a->sw == 1 && a->sh == 1 && a->out_w >= 3)
        return q ? plane_s1_pairs_odd_q(a, c0, c1, s) : plane_s1_pairs_odd(a, c0, c1, s);
#if DW_CHW
    if (clip8 && a->sw == 2 && a->sh == 2 && plane_direct(a))
        return plane_s2_direct(a, c0, c1, s);
#endif
    if (clip8 && a->sw == 2 && a->sh == 2 && (a->out_h >= 2 || q))   /* one row: DW_S2WORDS or DW_SINGLE */
        return q ? plane_s2_pairs_q(a, c0, c1, s) : plane_s2_pairs(a, c0, c1, s);
    return q ? plane_any_q(a, c0, c1, s) : plane_any(a, c0, c1, s);
}
#endif

/* channels [0, n) split over the cores; C = a->out_c is the output's pixel
 * stride (n == C for a layer, less for a fused block of channels) */
/* A 1x1 depthwise (a per-channel scale and bias: transformers' Add of a
 * bias or Mul by a constant after a token-major MatMul; a bias per element:
 * a positional embedding; the requantization per channel): elementwise, so
 * each core takes a run of pixels and every channel of them, the channel's
 * constants hoisted. n channels, input pixels a->in_c apart, output C. */
DW_COLD static void depthwise_1x1(const tsr_conv_args_t *a, int32_t n, int core, int ncores)
{
    const int32_t C = a->out_c, in_c = DW_PX(a), off = a->input_offset;
    int32_t p0, p1, c, p;
    pnn_chunk(a->out_h * a->out_w, 1, core, ncores, &p0, &p1);
    if (a->bias_elem.plane) {
        /* a bias per element (a positional embedding added to tokens) */
        const tsr_plane_t *e = &a->bias_elem;
        for (c = 0; c < n; c++) {
            const int32_t w = a->weights[c];
            const int32_t *bias = a->bias + (size_t)c * e->plane;
            int32_t oy = p0 / a->out_w, ox = p0 % a->out_w;
            pnn_rq_t rq = {0};
#ifdef TSR_ISA_XPULPV2
            xp_rq_t q;
            const int fast = xp_rq_channel(a->rq, c, &q);
#endif
            if (a->rq)
                rq = pnn_rq_channel(a->rq, c);
            for (p = p0; p < p1; p++) {
                const int32_t v = bias[oy * e->step_h + ox * e->step_w] + (a->in[(size_t)p * in_c + DW_CH(a, c)] + off) * w;
#ifdef TSR_ISA_XPULPV2
                if (fast)
                    ((int8_t *)a->out)[(size_t)p * C + c] = xp_rq(v, &q);
                else
#endif
                    pnn_store(a->out, (size_t)p * C + c, v, &rq, a->rq);
                if (++ox == a->out_w) {
                    ox = 0;
                    oy++;
                }
            }
        }
        return;
    }
    for (c = 0; c < n; c++) {
        const int32_t w = a->weights[c], b = (a->bias ? a->bias[c] : 0) + off * w;
        const int8_t *x = a->in + DW_CH(a, c);
        int8_t *y = (int8_t *)a->out + c;
        pnn_rq_t rq = {0};
#ifdef TSR_ISA_XPULPV2
        xp_rq_t q;
        if (xp_rq_channel(a->rq, c, &q)) {
            for (p = p0; p < p1; p++)
                y[(size_t)p * C] = xp_rq(b + x[(size_t)p * in_c] * w, &q);
            continue;
        }
#endif
        if (a->rq)
            rq = pnn_rq_channel(a->rq, c);
        for (p = p0; p < p1; p++)
            pnn_store(a->out, (size_t)p * C + c, b + x[(size_t)p * in_c] * w, &rq, a->rq);
        (void)y;
    }
}

DW_COLD static void depthwise_n(const tsr_conv_args_t *a, int32_t n, int core, int ncores)
{
    const int32_t C = a->out_c, kh = a->kh, kw = a->kw, off = a->input_offset;
    const int32_t area = kh * kw, step = a->sh * kw;
    const int32_t rows = (a->out_h - 1) * a->sh + kh;   /* padded input rows the windows read */
    int32_t c0, c1, c, ox, oy, i;
    int8_t *s;

    if (area == 1 && a->sh == 1 && a->sw == 1 && !(a->pad_t | a->pad_l | a->pad_b | a->pad_r)) {
        depthwise_1x1(a, n, core, ncores);
        return;
    }
    pnn_chunk(n, 1, core, ncores, &c0, &c1);
    if (c0 >= c1)
        return;
    if (!a->scratch || a->scratch_bytes < rows * kw || !pnn_offset_padable(off)) {
        depthwise_direct(a, c0, c1);
        return;
    }
    s = a->scratch + (size_t)core * (size_t)a->scratch_bytes;
#ifdef TSR_ISA_XPULPV2
    if (area == 9 && a->sh <= 3 && a->scratch_bytes >= ring_bytes(a)) {
        /* from a channel with the general requantization on: the stripes */
        c0 = a->scratch_bytes >= plane_bytes(a) ? plane_channels(a, c0, c1, s) : ring_channels(a, c0, c1, s);
    }
#endif
    for (c = c0; c < c1; c++) {
        const int8_t *w = a->weights + (size_t)c * area;
        const int32_t b = a->bias ? a->bias[c] : 0;
        pnn_rq_t rq = {0};
#ifdef TSR_ISA_XPULPV2
        xp_rq_t q;
        const int fast = area == 9 && xp_rq_channel(a->rq, c, &q);
#endif
        int high;
        if (a->rq)
            rq = pnn_rq_channel(a->rq, c);
        high = a->rq && pnn_rq_is_high(&rq);
        for (ox = 0; ox < a->out_w; ox++) {
            const int8_t *win = s;
            size_t o = (size_t)ox * C + c;
            stripe(a, c, ox, rows, s, (int8_t)-off);
            if (area == 9) {
                /* 3x3, the common case: the weights stay in registers and
                 * the offset's share, off * sum(w), joins the bias (padding
                 * holds -off, so it still adds nothing) */
                const int32_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5];
                const int32_t w6 = w[6], w7 = w[7], w8 = w[8];
                const int32_t b_off = b + off * (w0 + w1 + w2 + w3 + w4 + w5 + w6 + w7 + w8);
#ifdef TSR_ISA_XPULPV2
                if (fast) {
                    column3x3_xpulp(win, w, b_off, step, a->out_h, (int8_t *)a->out + o,
                                    (size_t)a->out_w * C, &q);
                    continue;
                }
#endif
#define DW_MAC9(acc)                                                                                       \
    PNN_MAC(acc, win[0], w0); PNN_MAC(acc, win[1], w1); PNN_MAC(acc, win[2], w2);                          \
    PNN_MAC(acc, win[3], w3); PNN_MAC(acc, win[4], w4); PNN_MAC(acc, win[5], w5);                          \
    PNN_MAC(acc, win[6], w6); PNN_MAC(acc, win[7], w7); PNN_MAC(acc, win[8], w8)
                if (high) {
                    /* the usual requantization in line (pnn_store's calls
                     * and tests were about 13 instructions an output) */
                    for (oy = 0; oy < a->out_h; oy++, win += step, o += (size_t)a->out_w * C) {
                        int32_t acc = b_off;
                        DW_MAC9(acc);
                        ((int8_t *)a->out)[o] = pnn_rq_high(acc, &rq);
                    }
                    continue;
                }
                for (oy = 0; oy < a->out_h; oy++, win += step, o += (size_t)a->out_w * C) {
                    int32_t acc = b_off;
                    DW_MAC9(acc);
                    pnn_store(a->out, o, acc, &rq, a->rq);
                }
#undef DW_MAC9
                continue;
            }
            for (oy = 0; oy < a->out_h; oy++, win += step, o += (size_t)a->out_w * C) {
                int32_t acc = b;
                for (i = 0; i < area; i++)
                    PNN_MAC(acc, win[i] + off, w[i]);
                pnn_store(a->out, o, acc, &rq, a->rq);
            }
        }
    }
}

#if DW_CHW
void pnn_depthwise_chw(const tsr_conv_args_t *a, int core, int ncores)
{
    depthwise_n(a, a->out_c, core, ncores);
}
#else
void pnn_depthwise(const tsr_conv_args_t *a, int core, int ncores)
{
    depthwise_n(a, a->out_c, core, ncores);
}

void pnn_depthwise_block(const tsr_conv_args_t *a, int core, int ncores)
{
    depthwise_n(a, a->in_c, core, ncores);
}
#endif
