/*
 * Pooling on HWC int8 tiles, c channels in and out. Work split: output
 * pixels per core, or channels (in fours) when that is more even (a global
 * pool has one pixel), see pnn_split.
 *
 * With Xpulpv2 and whole aligned words of channels: max pooling takes the
 * window's maximum of four channels at once (pv.max.b), average pooling
 * sums four channels per word load (a pv.sdotsp.b per lane against a
 * one-hot weight word adds that lane's byte) and requantizes as the
 * pointwise does (rq32.h).
 */
#include "pnn_common.h"
#include "tessera/pulp_nn.h"
#ifdef TSR_ISA_XPULPV2
#include "rq32.h"
#include "xpulp.h"

/* the four int8 lanes' maxima: pv.max.b */
static inline uint32_t xp_max4(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__(".insn r 0x57, 1, 0x18, %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

static inline int words(const void *in, const void *out, int32_t C, int32_t c0)
{
    return ((C | c0) & 3) == 0 && (((uintptr_t)in | (uintptr_t)out) & 3) == 0;
}

/* y = the requantized acc (rq32.h's three steps, the clamp general) */
static inline int32_t xp_rq1(int32_t acc, const int32_t *q, int32_t lo, int32_t hi)
{
    int32_t t = (int32_t)(((int64_t)acc * q[0]) >> 32);
    __asm__(XP_ADDRN("%0", "%1", "%2") : "+r"(t) : "r"(q[2]), "r"(q[1]));
    return xp_min(xp_max(t, lo), hi);
}
#endif

/* Window maxima; padded positions are skipped (they never win). */
void pnn_maxpool(const tsr_pool_args_t *a, int core, int ncores)
{
    const int32_t C = a->c;
    int32_t p, p0, p1, c0, c1, c, ky, kx;

    pnn_split(a->out_h * a->out_w, C, 1, 4, 0, core, ncores, &p0, &p1, &c0, &c1);
    for (p = p0; p < p1 && c0 < c1; p++) {
        const int32_t iy0 = (p / a->out_w) * a->sh - a->pad_t, ix0 = (p % a->out_w) * a->sw - a->pad_l;
        int32_t ky0, ky1, kx0, kx1;
        int8_t *o = a->out + (size_t)p * C;
        tsr_window(iy0, a->kh, a->in_h, &ky0, &ky1);
        tsr_window(ix0, a->kw, a->in_w, &kx0, &kx1);
        c = c0;
#ifdef TSR_ISA_XPULPV2
        if (!a->in_int32 && words(a->in, a->out, C, c0))
            for (; c + 4 <= c1; c += 4) {
                uint32_t m = 0x80808080u;   /* every window holds an input: exact */
                for (ky = ky0; ky < ky1; ky++) {
                    const int8_t *x = a->in + ((size_t)(iy0 + ky) * a->in_w + (size_t)(ix0 + kx0)) * C + c;
                    for (kx = kx0; kx < kx1; kx++, x += C)
                        m = xp_max4(m, *(const uint32_t *)x);
                }
                *(uint32_t *)(o + c) = m;
            }
#endif
        for (int32_t k = c; k < c1; k++)
            o[k] = INT8_MIN;   /* every window holds an input: exact */
        for (ky = ky0; ky < ky1 && c < c1; ky++)
            for (kx = kx0; kx < kx1; kx++) {
                const int8_t *x = a->in + ((size_t)(iy0 + ky) * a->in_w + (size_t)(ix0 + kx)) * C;
                for (int32_t k = c; k < c1; k++)
                    if (x[k] > o[k])
                        o[k] = x[k];
            }
    }
}

/* acc = sum(x + input_offset) over the window (no padding), requantized
 * (the multiplier carries 1 / window size). */
void pnn_avgpool(const tsr_pool_args_t *a, int core, int ncores)
{
    const int32_t C = a->c, kh = a->kh, kw = a->kw;
    const int32_t area_off = kh * kw * a->input_offset;
    const size_t row = (size_t)a->in_w * C;
    int32_t p, p0, p1, c0, c1, c, ky, kx;
    pnn_rq_t rq = {0};

    pnn_split(a->out_h * a->out_w, C, 1, 4, 0, core, ncores, &p0, &p1, &c0, &c1);
    if (a->rq && !a->rq->per_channel)
        rq = pnn_rq_channel(a->rq, 0);
    for (p = p0; p < p1 && c0 < c1; p++) {
        const int8_t *x0 = a->in + (size_t)(p / a->out_w) * a->sh * row + (size_t)(p % a->out_w) * a->sw * C;
        int8_t *o = a->out + (size_t)p * C;
        c = c0;
#ifdef TSR_ISA_XPULPV2
        if (xp_rq_usual(a->rq) && words(a->in, a->out, C, c0)) {
            const int32_t lo = a->rq->lo, hi = a->rq->hi;
            for (; c + 4 <= c1; c += 4) {
                int32_t s0 = area_off, s1 = area_off, s2 = area_off, s3 = area_off, q[4][3];
                int j;
                for (j = 0; j < 4; j++)
                    if (!xp_rec_rq(a->rq, a->rq->per_channel ? c + j : 0, q[j]))
                        break;
                if (j < 4)
                    break;
                for (ky = 0; ky < kh; ky++) {
                    const int8_t *x = x0 + (size_t)ky * row + c;
                    for (kx = 0; kx < kw; kx++, x += C) {
                        const uint32_t v = *(const uint32_t *)x;
                        s0 = xp_sdotsp(s0, v, 0x00000001u);
                        s1 = xp_sdotsp(s1, v, 0x00000100u);
                        s2 = xp_sdotsp(s2, v, 0x00010000u);
                        s3 = xp_sdotsp(s3, v, 0x01000000u);
                    }
                }
                *(uint32_t *)(o + c) = (uint32_t)(uint8_t)xp_rq1(s0, q[0], lo, hi)
                                       | (uint32_t)(uint8_t)xp_rq1(s1, q[1], lo, hi) << 8
                                       | (uint32_t)(uint8_t)xp_rq1(s2, q[2], lo, hi) << 16
                                       | (uint32_t)(uint8_t)xp_rq1(s3, q[3], lo, hi) << 24;
            }
        }
#endif
        for (; c < c1; c++) {
            int32_t acc = area_off;
            for (ky = 0; ky < kh; ky++) {
                const int8_t *x = x0 + (size_t)ky * row + c;
                for (kx = 0; kx < kw; kx++, x += C)
                    acc += *x;
            }
            if (a->rq) {
                if (a->rq->per_channel)
                    rq = pnn_rq_channel(a->rq, c);
                o[c] = pnn_rq_apply(acc, &rq);
            } else {
                /* not a layer the IR makes (avgpool requantizes); saturate */
                o[c] = (int8_t)(acc < INT8_MIN ? INT8_MIN : acc > INT8_MAX ? INT8_MAX : acc);
            }
        }
    }
}
