/*
 * The Xpulpv2 path of pnn_matmul (see matmul.c for the arithmetic): the K
 * loop of each 4 channel x 2 pixel block is a hardware loop of
 * post-increment word loads and 4-way int8 SIMD dot products (xpulp.h),
 * PULP-NN's inner loop, then K mod 4 scalar p.mac steps. An input offset
 * of 128 (the zero point -128 of an int8 tensor after ReLU: x + 128 is
 * x ^ 0x80 read as uint8) flips the inputs for pv.sdotusp.b (padding
 * stored as -128 flips to 0); 0 takes pv.sdotsp.b as it is; any other
 * offset adds off * sum(w) to the bias once per block and takes the raw
 * inputs. K below 4 takes the portable path, as do targets whose YAML does
 * not list xpulpv2 in toolchain.isa.
 */
#include "pnn_common.h"

#ifdef TSR_ISA_XPULPV2
#include "rq32.h"
#include "xpulp.h"

static inline int aligned4(const void *p)
{
    return ((uintptr_t)p & 3) == 0;
}

/* Constants of channels [c, c + 4) for xp_rq; 0 when one of them needs the
 * general requantization (pnn_rq_apply). */
static inline int xp_rq_block(const tsr_requant_t *rq, int32_t c, xp_rq_t *q)
{
    return xp_rq_channel(rq, c, &q[0]) && xp_rq_channel(rq, c + 1, &q[1]) && xp_rq_channel(rq, c + 2, &q[2])
           && xp_rq_channel(rq, c + 3, &q[3]);
}

/* Store four channels of one pixel with the general requantization (or
 * the int32 accumulators): out of line, to keep the hot frame small on the
 * cluster cores' 1 kB stacks. */
static __attribute__((noinline)) void store4_general(void *out, size_t o, int32_t c, const int32_t *acc,
                                                     const tsr_requant_t *rq)
{
    pnn_rq_t p = {0};
    int i;
    for (i = 0; i < 4; i++) {
        if (rq)
            p = pnn_rq_channel(rq, c + i);
        pnn_store(out, o + c + i, acc[i], &p, rq);
    }
}

/* The matmul path's helpers are out of line and compact: the cluster's
 * instruction cache is small (512 B per core, 4 kB shared on pulp-open),
 * and a convolution's hot code (im2col, this function, the stores) must
 * fit it, or every turn refills lines from L2. */

/* Requantize and store four channels of one pixel. */
static __attribute__((noinline)) void store4_small(void *out, size_t o, int32_t c, const int32_t *acc,
                                                   const xp_rq_t *q, int fast, const tsr_requant_t *rq)
{
    int i;
    if (!fast) {
        store4_general(out, o, c, acc, rq);
        return;
    }
    for (i = 0; i < 4; i++)
        ((int8_t *)out)[o + c + i] = xp_rq(acc[i], &q[i]);
}

/* sum of the K int8 weights of one row (for the offset's share) */
static __attribute__((noinline)) int32_t row_sum(const int8_t *w, int32_t K)
{
    int32_t s = 0, k;
    for (k = 0; k + 4 <= K; k += 4)
        s = xp_sdotsp(s, xp_lw(w + k), 0x01010101u);
    for (; k < K; k++)
        s += w[k];
    return s;
}

int pnn_matmul_xpulp(const int8_t *x0, const int8_t *x1, int32_t K, const int8_t *w,
                     const int32_t *bias, int32_t c0, int32_t c1, int32_t off, void *out,
                     size_t o0, size_t o1, const tsr_requant_t *rq)
{
    const int32_t n = K >> 2, tail = K & 3;
    /* 128: inputs flipped to uint8 in the loop; 0: as they are; any other
     * offset: its share off * sum(w) joins the bias, the loop takes the
     * raw inputs (im2col padding holds -off, which cancels it) */
    const int flip = off == 128;
    const uint32_t fold = flip ? 0 : (uint32_t)off;
    const int32_t toff = flip ? 128 : 0;      /* the offset the tail's MACs add */
    pnn_rq_t p = {0};
    int32_t c = c0, k;

    /* word loads at any alignment: the pulp-open cores handle misaligned
     * ones (a patch of 27 bytes puts every other row off a word) */
    if (n == 0)
        return 0;
    for (; c + 4 <= c1; c += 4) {
        const int8_t *q0 = w + (size_t)c * K, *q1 = q0 + K, *q2 = q1 + K, *q3 = q2 + K;
        const int8_t *p0 = x0, *p1 = x1;
        int32_t a00 = bias ? bias[c] : 0, a10 = bias ? bias[c + 1] : 0;
        int32_t a20 = bias ? bias[c + 2] : 0, a30 = bias ? bias[c + 3] : 0;
        int32_t a01, a11, a21, a31;
        int32_t acc[4];
        xp_rq_t q[4];
        const int fast = xp_rq_block(rq, c, q);
        if (fold) {
            a00 = (int32_t)((uint32_t)a00 + fold * (uint32_t)row_sum(q0, K));
            a10 = (int32_t)((uint32_t)a10 + fold * (uint32_t)row_sum(q1, K));
            a20 = (int32_t)((uint32_t)a20 + fold * (uint32_t)row_sum(q2, K));
            a30 = (int32_t)((uint32_t)a30 + fold * (uint32_t)row_sum(q3, K));
        }
        a01 = a00, a11 = a10, a21 = a20, a31 = a30;
        if (x1) {
            if (flip)
                XP_BLOCK_4X2(XP_SDOTUSP, XP_FLIP_SETUP, XP_FLIP2, XP_LEN_4X2_FLIP);
            else
                XP_BLOCK_4X2(XP_SDOTSP, "", "", XP_LEN_4X2);
            /* the loop left every pointer at the tail */
            for (k = 0; k < tail; k++) {
                const int32_t xa = p0[k] + toff, xb = p1[k] + toff;
                a00 = xp_mac(a00, xa, q0[k]); a01 = xp_mac(a01, xb, q0[k]);
                a10 = xp_mac(a10, xa, q1[k]); a11 = xp_mac(a11, xb, q1[k]);
                a20 = xp_mac(a20, xa, q2[k]); a21 = xp_mac(a21, xb, q2[k]);
                a30 = xp_mac(a30, xa, q3[k]); a31 = xp_mac(a31, xb, q3[k]);
            }
            acc[0] = a01; acc[1] = a11; acc[2] = a21; acc[3] = a31;
            store4_small(out, o1, c, acc, q, fast, rq);
        } else {
            (void)a01; (void)a11; (void)a21; (void)a31; (void)p1;
            if (flip)
                XP_BLOCK_4X1(XP_SDOTUSP, XP_FLIP_SETUP, XP_FLIP1, XP_LEN_4X1_FLIP);
            else
                XP_BLOCK_4X1(XP_SDOTSP, "", "", XP_LEN_4X1);
            for (k = 0; k < tail; k++) {
                const int32_t xa = p0[k] + toff;
                a00 = xp_mac(a00, xa, q0[k]); a10 = xp_mac(a10, xa, q1[k]);
                a20 = xp_mac(a20, xa, q2[k]); a30 = xp_mac(a30, xa, q3[k]);
            }
        }
        acc[0] = a00; acc[1] = a10; acc[2] = a20; acc[3] = a30;
        store4_small(out, o0, c, acc, q, fast, rq);
    }
    /* the last c1 - c mod 4 channels, one at a time */
    for (; c < c1; c++) {
        const int8_t *q = w + (size_t)c * K;
        int32_t a0 = bias ? bias[c] : 0, a1 = a0;
        for (k = 0; k < K; k++) {
            a0 = xp_mac(a0, x0[k] + off, q[k]);
            if (x1)
                a1 = xp_mac(a1, x1[k] + off, q[k]);
        }
        if (rq)
            p = pnn_rq_channel(rq, c);
        pnn_store(out, o0 + c, a0, &p, rq);
        if (x1)
            pnn_store(out, o1 + c, a1, &p, rq);
    }
    return 1;
}

/*
 * pnn_pointwise's fast path: one 4-channel block's constants, then all of
 * the core's pixel pairs in one asm block of two nested hardware loops
 * (loop 1 over the pairs, loop 0 over K / 4). Per pair: the eight
 * accumulators from the block's biases, the 14-instruction K loop (six
 * post-increment loads, eight pv.sdotsp.b), then the requantization in
 * three instructions per output, exactly tessera's (round half up, shift s
 * of 33 to 54, no additive term):
 *   mulh  t = (acc * mul) >> 32
 *   p.addRN t = (t + (zp << (s - 32)) + 2^(s - 33)) >> (s - 32)
 *     (zp << (s - 32) is a multiple of 2^(s - 32): adding it before the
 *     floor shift adds zp after it; |t| <= 2^30 and |zp << 22| <= 2^29,
 *     so the 32-bit sum cannot wrap)
 *   p.clipi t, 8   (or p.max / p.min with the layer's own clamp)
 * and each pixel's four bytes packed into a word (pv.packlo.b,
 * pv.packhi.b) and stored with a post-increment of two pixels.
 */

/* off * sum(w) of channels [c, c + 4) into the record's biases (layers
 * whose offset the code generator could not fold) */
static __attribute__((noinline)) void fold_offset(const tsr_conv_args_t *a, int32_t c, int32_t K, xp_rec4_t *r)
{
    int j;
    for (j = 0; j < 4; j++)
        r->b[j] = (int32_t)((uint32_t)r->b[j]
                            + (uint32_t)a->input_offset * (uint32_t)row_sum(a->weights + (size_t)(c + j) * K, K));
}

/* The record of channels [c, c + 4) (weights rows of K bytes); 0 when a
 * channel's shift is outside [33, 54] (the general requantization; the
 * biases are set either way). ok: a->rq is xp_rq_usual. A short leaf: it
 * runs per block per tile and shares the instruction cache with the asm
 * blocks. */
int pnn_xp_record4(const tsr_conv_args_t *a, int32_t c, int32_t K, int ok, xp_rec4_t *r)
{
    const int32_t *bias = a->bias;
    const tsr_requant_t *rq = a->rq;
    const int8_t *shift;
    const int32_t *mul;
    int32_t k, step, zp, j;
    if (bias) {
        r->b[0] = bias[c], r->b[1] = bias[c + 1], r->b[2] = bias[c + 2], r->b[3] = bias[c + 3];
    } else {
        r->b[0] = r->b[1] = r->b[2] = r->b[3] = 0;
    }
    if (a->input_offset)
        fold_offset(a, c, K, r);
    if (!ok)
        return 0;
    shift = rq->shift, mul = rq->mul, zp = rq->zero_point;
    step = rq->per_channel ? 1 : 0;
    k = step ? c : 0;
    for (j = 0; j < 4; j++, k += step) {
        const int32_t sh = shift[k] - 32;
        if (sh < 1 || sh > 22)
            return 0;
        r->q[j][0] = mul[k];
        r->q[j][1] = sh;
        r->q[j][2] = (int32_t)((uint32_t)zp << sh);
    }
    r->lo = rq->lo;
    r->hi = rq->hi;
    return 1;
}

/* a pixel pair's 4x2 block up to its accumulators (loop 1's first 27
 * instructions: the set-up, lp.setup, loop 0 over K) */
#define PW_BLOCK                                                                                        \
    "lw s2, 0(%[rec])\n\tlw s4, 4(%[rec])\n\tlw s6, 8(%[rec])\n\tlw s8, 12(%[rec])\n\t"                   \
    "mv s10, %[wc]\n\tadd s11, %[wc], %[K]\n\tadd t5, s11, %[K]\n\tadd t6, t5, %[K]\n\t"                    \
    "mv s3, s2\n\tmv s5, s4\n\tmv s7, s6\n\tmv s9, s8\n\t"                                               \
    ".insn i 0x7B, 4, x0, %[n], 28\n\t" XP_K4X2("%[p0]", "%[p1]", "s10", "s11", "t5", "t6")

/* instructions of loop 1's body: 12 set-up, lp.setup, 14 in loop 0, 28 of
 * requantization, the clamp, 4 packs, 2 pointer steps, 2 stores */
#define PW_OUTER(clamp_len) (12 + 1 + 14 + 28 + (clamp_len) + 8)
#define PW_PAIRS(CLAMP, CLAMP_LEN)                                                                      \
    __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t.Lpw_set%=:\n\t"             \
                     ".insn i 0x7B, 4, x1, %[np], " XP_XSTR(2 * PW_OUTER(CLAMP_LEN)) "\n\t"                 \
                     PW_BLOCK                                                                            \
                     XP_RQ8("%[rec]") CLAMP XP_PACK8                                                     \
                     "add %[p0], %[p0], %[K]\n\tadd %[p1], %[p1], %[K]\n\t"                                  \
                     XP_SW_RR_INC("t0", "%[y0]", "%[st]") ".Lpw_end%=:\n\t" XP_SW_RR_INC("t1", "%[y1]", "%[st]") \
                     ".if .Lpw_end%= - .Lpw_set%= != 4 * " XP_XSTR(PW_OUTER(CLAMP_LEN)) "\n\t"                \
                     ".error \"hardware loop length\"\n\t.endif\n\t.option pop"                               \
                     : [p0] "+r"(p0), [p1] "+r"(p1), [y0] "+r"(y0), [y1] "+r"(y1)                        \
                     : [np] "r"(np), [n] "r"(n), [wc] "r"(wc), [K] "r"(K), [rec] "r"(&rec), [st] "r"(st)  \
                     : "t0", "t1", "t2", "t3", "t5", "t6", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9",    \
                       "s10", "s11", "memory")

/* The same for a channel-major output (pnn_pointwise_chw): each channel's
 * two pixels packed into a halfword and stored in its plane (P bytes
 * apart; bk steps back to the first channel's next pair), two instructions
 * more per block than the two words of the HWC pixels. */
#define PW_OUTER_CHW(clamp_len) (12 + 1 + 14 + 28 + (clamp_len) + 10)
#define PW_PAIRS_CHW(CLAMP, CLAMP_LEN)                                                                  \
    __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t.Lpwc_set%=:\n\t"            \
                     ".insn i 0x7B, 4, x1, %[np], " XP_XSTR(2 * PW_OUTER_CHW(CLAMP_LEN)) "\n\t"             \
                     PW_BLOCK                                                                            \
                     XP_RQ8("%[rec]") CLAMP                                                              \
                     XP_PACK8_CHW                                                                        \
                     "add %[p0], %[p0], %[K]\n\tadd %[p1], %[p1], %[K]\n\t"                                  \
                     XP_SH_RR_INC("t0", "%[y]", "%[P]") XP_SH_RR_INC("t1", "%[y]", "%[P]")                  \
                     XP_SH_RR_INC("t2", "%[y]", "%[P]") ".Lpwc_end%=:\n\t" XP_SH_RR_INC("t3", "%[y]", "%[bk]") \
                     ".if .Lpwc_end%= - .Lpwc_set%= != 4 * " XP_XSTR(PW_OUTER_CHW(CLAMP_LEN)) "\n\t"           \
                     ".error \"hardware loop length\"\n\t.endif\n\t.option pop"                               \
                     : [p0] "+r"(p0), [p1] "+r"(p1), [y] "+r"(y)                                         \
                     : [np] "r"(np), [n] "r"(n), [wc] "r"(wc), [K] "r"(K), [rec] "r"(&rec), [P] "r"(P),    \
                       [bk] "r"(2 - 3 * P)                                                                \
                     : "t0", "t1", "t2", "t3", "t5", "t6", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9",    \
                       "s10", "s11", "memory")

/* Pixels [pp, p_end) of the 4-channel block at c, pair by pair in C: the
 * general requantization, int32 outputs or unaligned output rows (out of
 * line: its frame stays off the fast path's). */
static __attribute__((noinline)) void pw_block_general(const tsr_conv_args_t *a, int32_t pp, int32_t p_end,
                                                       int32_t c, const xp_rec4_t *rec)
{
    const int32_t K = a->in_c, n = K >> 2, out_c = a->out_c;
    const int8_t *wc = a->weights + (size_t)c * K;
    const tsr_requant_t *rq = a->rq;
    int32_t acc[4];
    xp_rq_t q[4];
    const int qok = xp_rq_block(rq, c, q);
    for (; pp + 1 < p_end; pp += 2) {
        const int8_t *p0 = a->in + (size_t)pp * K, *p1 = p0 + K;
        const int8_t *q0 = wc, *q1 = q0 + K, *q2 = q1 + K, *q3 = q2 + K;
        int32_t a00 = rec->b[0], a10 = rec->b[1], a20 = rec->b[2], a30 = rec->b[3];
        int32_t a01 = a00, a11 = a10, a21 = a20, a31 = a30;
        XP_BLOCK_4X2(XP_SDOTSP, "", "", XP_LEN_4X2);
        acc[0] = a00; acc[1] = a10; acc[2] = a20; acc[3] = a30;
        store4_small(a->out, (size_t)pp * out_c, c, acc, q, qok, rq);
        acc[0] = a01; acc[1] = a11; acc[2] = a21; acc[3] = a31;
        store4_small(a->out, (size_t)(pp + 1) * out_c, c, acc, q, qok, rq);
    }
    if (pp < p_end) {
        const int8_t *p0 = a->in + (size_t)pp * K;
        const int8_t *q0 = wc, *q1 = q0 + K, *q2 = q1 + K, *q3 = q2 + K;
        int32_t a00 = rec->b[0], a10 = rec->b[1], a20 = rec->b[2], a30 = rec->b[3];
        XP_BLOCK_4X1(XP_SDOTSP, "", "", XP_LEN_4X1);
        acc[0] = a00; acc[1] = a10; acc[2] = a20; acc[3] = a30;
        store4_small(a->out, (size_t)pp * out_c, c, acc, q, qok, rq);
    }
}

/* pnn_pointwise's pixels [p, p_end) x channels [c0, c1), channel blocks
 * outermost (each block's constants once for all its pixel pairs).
 * Returns the first channel it did not compute: the c1 - c0 mod 4 last
 * ones (pnn_matmul's one-channel loop takes them), or c0 when the operands
 * need the portable path (see pnn_matmul_xpulp). Any input offset: a
 * non-zero one joins the biases (off * sum(w), once per block); the code
 * generator folds it at build time (layers then come with offset 0). */
int32_t pnn_pointwise_xpulp(const tsr_conv_args_t *a, int32_t p, int32_t p_end, int32_t c0, int32_t c1)
{
    const int32_t K = a->in_c, n = K >> 2, out_c = a->out_c;
    /* the packed stores: whole aligned words */
    const int words = a->rq && (out_c & 3) == 0 && aligned4(a->out);
    const int ok = xp_rq_usual(a->rq);
    int32_t c = c0;

    if ((K & 3) || n == 0 || !aligned4(a->in) || !aligned4(a->weights))
        return c0;
    for (; c + 4 <= c1; c += 4) {
        const int8_t *wc = a->weights + (size_t)c * K;
        xp_rec4_t rec;
        int32_t pp = p;
        if (pnn_xp_record4(a, c, K, ok, &rec) && words && p_end - p >= 2) {
            const int8_t *p0 = a->in + (size_t)p * K, *p1 = p0 + K;
            int8_t *y0 = (int8_t *)a->out + (size_t)p * out_c + c, *y1 = y0 + out_c;
            const int32_t np = (p_end - p) >> 1, st = 2 * out_c;
            if (rec.lo == -128 && rec.hi == 127)
                PW_PAIRS(XP_CLIP8X8, XP_CLIP8X8_LEN);
            else
                PW_PAIRS(XP_MINMAX8("%[rec]"), XP_MINMAX8_LEN);
            pp += 2 * np;
        }
        if (pp < p_end)
            pw_block_general(a, pp, p_end, c, &rec);
    }
    return c;
}

/* pnn_pointwise_xpulp for pnn_pointwise_chw: pixel pairs of whole
 * 4-channel blocks with the 32-bit requantization; returns the first
 * channel it did not compute and sets *done to the pixels it did ([p,
 * *done) of channels [c0, return)). The rest is pnn_pointwise_chw's. */
int32_t pnn_pointwise_xpulp_chw(const tsr_conv_args_t *a, int32_t p, int32_t p_end, int32_t c0, int32_t c1,
                                int32_t *done)
{
    const int32_t K = a->in_c, n = K >> 2, P = a->out_h * a->out_w;
    const int32_t np = (p_end - p) >> 1;
    const int ok = xp_rq_usual(a->rq);
    int32_t c = c0;

    *done = p + 2 * np;
    if ((K & 3) || n == 0 || !aligned4(a->in) || !aligned4(a->weights) || !a->rq || np == 0)
        return c0;
    for (; c + 4 <= c1; c += 4) {
        const int8_t *wc = a->weights + (size_t)c * K;
        const int8_t *p0 = a->in + (size_t)p * K, *p1 = p0 + K;
        int8_t *y = (int8_t *)a->out + (size_t)c * P + p;
        xp_rec4_t rec;
        if (!pnn_xp_record4(a, c, K, ok, &rec))
            break;
        if (rec.lo == -128 && rec.hi == 127)
            PW_PAIRS_CHW(XP_CLIP8X8, XP_CLIP8X8_LEN);
        else
            PW_PAIRS_CHW(XP_MINMAX8("%[rec]"), XP_MINMAX8_LEN);
    }
    return c;
}

#else
/* the portable build has no Xpulp path (an empty file is not ISO C) */
typedef int pnn_no_xpulp_t;
#endif
