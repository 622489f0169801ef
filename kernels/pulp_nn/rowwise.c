/*
 * Attention's row-wise ops on the cluster, PULP-NN style: the softmax (the
 * QDQ table form; Deeploy's iSoftmax, ITAMax and ITAPartialMax through the
 * shared row function), the layer norms (QDQ's integer form, Deeploy's
 * iLayerNorm) and the lookup table (GELU, Erf). Rows go to the cores in
 * contiguous chunks (pnn_chunk). The arithmetic is tessera/rowwise.h's: the
 * reference kernels' results in 32-bit words, per-row constants hoisted;
 * here the rows' maximum and sums, four values a word on Xpulp (p.max,
 * pv.sdotsp.b), and the table read from a copy on the core's stack (the
 * generated code's table lives in L2, about 15 cycles a read).
 */
#include "pnn_common.h"
#include "tessera/rowwise.h"
#ifdef TSR_ISA_XPULPV2
#include "xpulp.h"
#endif

static int32_t row_max(const int8_t *x, int32_t n)
{
    int32_t m = -128, j;
#ifdef TSR_ISA_XPULPV2
    for (j = 0; j < n; j++)
        m = xp_max(m, x[j]);
#else
    for (j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
#endif
    return m;
}

static void row_sums(const int8_t *x, int32_t n, int32_t *s, int32_t *ss)
{
    int32_t a = 0, b = 0, j = 0;
#ifdef TSR_ISA_XPULPV2
    for (; j + 4 <= n; j += 4) {
        const uint32_t w = xp_lw(x + j);
        a = xp_sdotsp(a, w, 0x01010101u);
        b = xp_sdotsp(b, w, w);
    }
#endif
    for (; j < n; j++) {
        a += x[j];
        b += x[j] * x[j];
    }
    *s = a, *ss = b;
}

void pnn_softmax(const tsr_softmax_args_t *a, int core, int ncores)
{
    int32_t p0, p1;
    if (a->rounding == TSR_ROUND_TFLITE) {
        tsr_softmax(a, core, ncores);
        return;
    }
    pnn_chunk(a->pixels, 1, core, ncores, &p0, &p1);
    tsr_rw_softmax_rows(a, p0, p1, row_max);
}

void pnn_layernorm(const tsr_layernorm_args_t *a, int core, int ncores)
{
    int32_t p0, p1;
    pnn_chunk(a->pixels, 1, core, ncores, &p0, &p1);
    tsr_rw_layernorm_rows(a, p0, p1, row_sums);
}

/* the core's values through a table of 256 int8 (in word-sized pieces) */
static void lut_run(const int8_t *in, int8_t *out, int32_t n, const int8_t *table)
{
    int32_t j = 0;
    const uint8_t *t = (const uint8_t *)table + 128;
    for (; j + 4 <= n; j += 4) {
        const int8_t *x = in + j;
        out[j] = (int8_t)t[x[0]];
        out[j + 1] = (int8_t)t[x[1]];
        out[j + 2] = (int8_t)t[x[2]];
        out[j + 3] = (int8_t)t[x[3]];
    }
    for (; j < n; j++)
        out[j] = (int8_t)t[in[j]];
}

#ifdef TSR_ISA_XPULPV2
/* The same with Xpulp: a hardware loop of four values a turn, three
 * instructions a value (p.lb with post-increment, p.lbu at table + x, p.sb
 * with post-increment), each load's value used four instructions on (no
 * load stall); about 3 cycles a value against 6 for the C loop. */
static void lut_xpulp(const int8_t *in, int8_t *out, int32_t n, const int8_t *table)
{
    const int8_t *t = table + 128;
    const int32_t quads = n >> 2;
    if (quads > 0)
        __asm__ volatile(XP_LOOP("%[q]", 12)
                         XP_LB_INC1("t0", "%[s]") XP_LB_INC1("t1", "%[s]") XP_LB_INC1("t2", "%[s]")
                         XP_LB_INC1("t3", "%[s]")
                         XP_LBU_RR("t0", "%[t]", "t0") XP_LBU_RR("t1", "%[t]", "t1") XP_LBU_RR("t2", "%[t]", "t2")
                         XP_LBU_RR("t3", "%[t]", "t3")
                         XP_SB_INC1("t0", "%[d]") XP_SB_INC1("t1", "%[d]") XP_SB_INC1("t2", "%[d]")
                         XP_LOOP_END() XP_SB_INC1("t3", "%[d]") XP_LOOP_CHECK(12)
                         : [s] "+r"(in), [d] "+r"(out)
                         : [q] "r"(quads), [t] "r"(t)
                         : "t0", "t1", "t2", "t3", "memory");
    for (n &= 3; n > 0; n--)
        *out++ = t[*in++];
}

/* Whether the table (64 words) is a clamp, t[x] = min(max(x, lo), hi): a
 * Clip or Relu that keeps its input's quantization. Its words against the
 * clamped words of x = -128..127 (x's bytes are u ^ 0x80 for u = 0..255,
 * four a word: no carry between bytes). lo4, hi4: lo and hi four times. */
static int lut_is_clamp(const uint32_t *table, uint32_t *lo4, uint32_t *hi4)
{
    const int8_t lo = (int8_t)table[0], hi = (int8_t)(table[63] >> 24);
    uint32_t u = 0x03020100u, lo_w = 0x01010101u * (uint8_t)lo, hi_w = 0x01010101u * (uint8_t)hi, v;
    int32_t i;
    if (lo > hi)
        return 0;
    for (i = 0; i < 64; i++, u += 0x04040404u) {
        __asm__(XP_MAX4("%0", "%1", "%2") : "=r"(v) : "r"(u ^ 0x80808080u), "r"(lo_w));
        __asm__(XP_MIN4("%0", "%0", "%1") : "+r"(v) : "r"(hi_w));
        if (v != table[i])
            return 0;
    }
    *lo4 = lo_w, *hi4 = hi_w;
    return 1;
}

/* n values clamped to [lo, hi], in and out word-aligned: a word a turn
 * (p.lw, pv.max.b, pv.min.b, p.sw: four values in four instructions) */
static void clamp_xpulp(const int8_t *in, int8_t *out, int32_t words, uint32_t lo4, uint32_t hi4)
{
    if (words > 0)
        __asm__ volatile(XP_LOOP("%[n]", 4) XP_LW_INC("t0", "%[s]") XP_MAX4("t0", "t0", "%[lo]")
                         XP_MIN4("t0", "t0", "%[hi]") XP_LOOP_END() XP_SW_INC4("t0", "%[d]") XP_LOOP_CHECK(4)
                         : [s] "+r"(in), [d] "+r"(out)
                         : [n] "r"(words), [lo] "r"(lo4), [hi] "r"(hi4)
                         : "t0", "memory");
}
#endif

void pnn_lut(const tsr_lut_args_t *a, int core, int ncores)
{
    int32_t p0, p1, p;
    if (a->per_channel) {
        tsr_lut(a, core, ncores);
        return;
    }
    /* values, not pixels, to the cores (four at a time: a core's run
     * starts where the others' do, word for word): 49 pixels of 128 values
     * left the eighth core idle */
    pnn_chunk(a->pixels * a->c, 4, core, ncores, &p0, &p1);
    if (p1 - p0 >= 256) {
        /* a copy on the stack costs 64 word reads; each value reads the table once */
        uint32_t copy[64];
#ifdef TSR_ISA_XPULPV2
        const int8_t *in = a->in + p0;
        int8_t *out = a->out + p0;
        int32_t n = p1 - p0;
        uint32_t lo4, hi4;
        for (p = 0; p < 64; p++)
            copy[p] = xp_lw(a->table + 4 * p);
        /* a clamp on word-aligned runs (the tiles' buffers are, and each
         * core's run starts at a multiple of 4): words, then the last
         * bytes through the table */
        if (!(((uintptr_t)in | (uintptr_t)out) & 3) && lut_is_clamp(copy, &lo4, &hi4)) {
            clamp_xpulp(in, out, n >> 2, lo4, hi4);
            p = n & ~3;
            lut_xpulp(in + p, out + p, n - p, (const int8_t *)copy);
        } else {
            lut_xpulp(in, out, n, (const int8_t *)copy);
        }
        return;
#else
        const uint8_t *src = (const uint8_t *)a->table;
        for (p = 0; p < 64; p++)
            copy[p] = (uint32_t)src[4 * p] | (uint32_t)src[4 * p + 1] << 8 | (uint32_t)src[4 * p + 2] << 16
                      | (uint32_t)src[4 * p + 3] << 24;
#endif
        lut_run(a->in + p0, a->out + p0, p1 - p0, (const int8_t *)copy);
    } else if (p1 > p0) {
        lut_run(a->in + p0, a->out + p0, p1 - p0, a->table);
    }
}
