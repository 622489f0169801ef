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
    for (p = p0; p < p1; p++) {
        int32_t oy = p / a->out_w, ox = p % a->out_w;
        int32_t iy0 = oy * a->sh - a->pad_t, ix0 = ox * a->sw - a->pad_l, ky0, ky1, kx0, kx1;
        size_t o = (size_t)p * a->out_c;
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
            pnn_store(a->out, o + co, acc, &rq, a->rq);
        }
    }
}

#ifdef TSR_ISA_XPULPV2
#include "rq32.h"
#include "xpulp.h"

/*
 * The Xpulp path: compact enough for the cluster core's 512-byte L0
 * instruction cache (the im2col by memcpy/memset calls plus the general
 * matmul ran at about 0.1 MAC/cycle per core on the first layer). Each
 * core first writes, for its channels, one record of the folded bias and
 * the 32-bit requantization constants into its scratch; the patch is
 * padded to a multiple of 4 bytes with zeros, so every K loop is whole
 * words (the word that ends a weight row reads one to three bytes of the
 * next row, met by those zeros); the offset is always folded into the
 * bias (b + off * sum(w)), padding holds -off, and the loop is plain
 * pv.sdotsp.b.
 */
typedef struct {
    int32_t b, mul, rnd, sh, lo, hi, zp;
} cv_rec_t;

/* scratch bytes per core this path needs for channels [c0, c1) */
static inline int32_t cv_bytes(int32_t patch, int32_t c0, int32_t c1)
{
    return 3 + 2 * ((patch + 3) & ~3) + (int32_t)sizeof(cv_rec_t) * (c1 - c0);
}

/* The window of output pixel (oy, ox) into col: K4 bytes, padding -off,
 * the last K4 - patch bytes zero. */
static inline void cv_im2col(const tsr_conv_args_t *a, int32_t oy, int32_t ox, int8_t *col, int32_t K4,
                             int8_t pad)
{
    /* the fields as locals: the byte stores would make GCC reload them */
    const int32_t in_c = a->in_c, kw = a->kw, kh = a->kh, in_h = a->in_h, in_w = a->in_w;
    const int32_t iy0 = oy * a->sh - a->pad_t, ix0 = ox * a->sw - a->pad_l, row = kw * in_c;
    const int8_t *in = a->in;
    int32_t kx0, kx1, ky, k;
    int8_t *end = col + K4;
    tsr_window(ix0, kw, in_w, &kx0, &kx1);
    for (ky = 0; ky < kh; ky++, col += row) {
        const int32_t iy = iy0 + ky;
        const int8_t *src = in + ((size_t)iy * in_w + ix0) * in_c;
        if (iy < 0 || iy >= in_h || kx0 >= kx1) {
            for (k = 0; k < row; k++)
                col[k] = pad;
            continue;
        }
        if (kx0 == 0 && kx1 == kw) {
            /* inside the tile (the usual case): the row is one run, copied
             * by words at any alignment */
            for (k = 0; k + 4 <= row; k += 4)
                xp_sw(col + k, xp_lw(src + k));
            for (; k < row; k++)
                col[k] = src[k];
            continue;
        }
        for (k = 0; k < kx0 * in_c; k++)
            col[k] = pad;
        xp_gather(col + k, src + k, 1, (kx1 - kx0) * in_c);
        for (k = kx1 * in_c; k < row; k++)
            col[k] = pad;
    }
    while (col < end)
        *col++ = 0;
}

/* the clamp and the zero point are per tensor: lo, hi, zp of any record */
#define CV_RQ(acc, m, rn, s) \
    ((int8_t)(xp_min(xp_max(((int32_t)(((int64_t)(acc) * (m)) >> 32) + (rn)) >> (s), lo), hi) + zp))

/* Pixels [p, p_end) x channels [c0, c1) (c1 - c0 a multiple of 4); 0 when
 * a channel needs the general requantization (nothing computed). */
static __attribute__((noinline, optimize("no-tree-loop-distribute-patterns"))) int
conv_xpulp(const tsr_conv_args_t *a, int32_t p, int32_t p_end, int32_t c0, int32_t c1, int8_t *s)
{
    const int32_t patch = a->kh * a->kw * a->in_c, K4 = (patch + 3) & ~3, n = K4 >> 2;
    const int32_t ow = a->out_w, out_c = a->out_c, off = a->input_offset;
    const int8_t pad = (int8_t)-off;
    int8_t *col0 = (int8_t *)(((uintptr_t)s + 3) & ~(uintptr_t)3), *col1 = col0 + K4;
    cv_rec_t *rec = (cv_rec_t *)(col1 + K4), *r;
    int32_t c, k, oy = p / ow, ox = p % ow, lo, hi, zp;
    int8_t *out = a->out;
    for (c = c0, r = rec; c < c1; c++, r++) {
        const int8_t *w = a->weights + (size_t)c * patch;
        xp_rq_t q;
        int32_t sum = 0;
        if (!xp_rq_channel(a->rq, c, &q))
            return 0;
        for (k = 0; k < patch; k++)
            sum += w[k];
        r->b = (a->bias ? a->bias[c] : 0) + off * sum;
        r->mul = q.mul, r->rnd = q.round, r->sh = q.shift, r->lo = q.lo, r->hi = q.hi, r->zp = q.zero_point;
    }
    lo = rec->lo, hi = rec->hi, zp = rec->zp;
    for (; p < p_end; p += 2) {
        const int two = p + 1 < p_end;
        int8_t *y0 = out + (size_t)p * out_c, *y1 = y0 + out_c;
        cv_im2col(a, oy, ox, col0, K4, pad);
        if (++ox == ow)
            ox = 0, oy++;
        if (two) {
            cv_im2col(a, oy, ox, col1, K4, pad);
            if (++ox == ow)
                ox = 0, oy++;
        }
        for (c = c0, r = rec; c < c1; c += 4, r += 4) {
            const int8_t *p0 = col0, *p1 = col1, *q0 = a->weights + (size_t)c * patch, *q1 = q0 + patch;
            const int8_t *q2 = q1 + patch, *q3 = q2 + patch;
            int32_t a00 = r[0].b, a10 = r[1].b, a20 = r[2].b, a30 = r[3].b;
            int32_t a01 = a00, a11 = a10, a21 = a20, a31 = a30;
            XP_BLOCK_4X2(XP_SDOTSP, "", "", XP_LEN_4X2);
            {
                /* locals: the int8 stores would make GCC reload each from r */
                const int32_t m0 = r[0].mul, m1 = r[1].mul, m2 = r[2].mul, m3 = r[3].mul;
                const int32_t n0 = r[0].rnd, n1 = r[1].rnd, n2 = r[2].rnd, n3 = r[3].rnd;
                const int32_t s0 = r[0].sh, s1 = r[1].sh, s2 = r[2].sh, s3 = r[3].sh;
                y0[c] = CV_RQ(a00, m0, n0, s0);
                y0[c + 1] = CV_RQ(a10, m1, n1, s1);
                y0[c + 2] = CV_RQ(a20, m2, n2, s2);
                y0[c + 3] = CV_RQ(a30, m3, n3, s3);
                if (two) {
                    y1[c] = CV_RQ(a01, m0, n0, s0);
                    y1[c + 1] = CV_RQ(a11, m1, n1, s1);
                    y1[c + 2] = CV_RQ(a21, m2, n2, s2);
                    y1[c + 3] = CV_RQ(a31, m3, n3, s3);
                }
            }
        }
    }
    return 1;
}
#endif

void pnn_conv2d(const tsr_conv_args_t *a, int core, int ncores)
{
    const int32_t patch = a->kh * a->kw * a->in_c, off = a->input_offset;
    const int32_t ow = a->out_w;
    int32_t p, p_end, c0, c1;
    int8_t *col0, *col1;

    pnn_split(a->out_h * ow, a->out_c, 2, 4, core, ncores, &p, &p_end, &c0, &c1);
    if (p >= p_end || c0 >= c1)
        return;
    if (!a->scratch || a->scratch_bytes < 2 * patch || !pnn_offset_padable(off)) {
        conv_direct(a, p, p_end, c0, c1);
        return;
    }
    col0 = a->scratch + (size_t)core * (size_t)a->scratch_bytes;
#ifdef TSR_ISA_XPULPV2
    if (((c1 - c0) & 3) == 0 && patch >= 4 && a->scratch_bytes >= cv_bytes(patch, c0, c1)
        && conv_xpulp(a, p, p_end, c0, c1, col0))
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
