/*
 * Internals shared by tessera's PULP-NN-style kernels (not API; the API is
 * kernels/include/tessera/kernels.h plus the pnn_* declarations in
 * pulp_nn.h).
 *
 * The kernels follow PULP-NN's structure (Garofalo et al., 2020): HWC int8
 * tiles already in L1, every core of the cluster calling the same kernel
 * with its core index, the work split in contiguous chunks of output rows
 * or output channels, convolution as im2col of two output pixels into a
 * per-core buffer followed by a matmul register-blocked 4 output channels x
 * 2 pixels, requantization fused into the matmul's store.
 *
 * Written in portable C (RV32IMC, the host, Cortex-M all compile it). Where
 * PULP's GCC would use a multiply-accumulate the code goes through PNN_MAC
 * below; define PNN_XPULP when building with a PULP toolchain to get its
 * builtin. The Xpulpv2 paths for Debian's GCC (SIMD dot products, hardware
 * loops, post-increment loads in asm: xpulp.h) are compiled when the
 * target asks for them (TSR_ISA_XPULPV2).
 */
#ifndef TESSERA_PNN_COMMON_H
#define TESSERA_PNN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/kernels.h"
#include "tessera/window.h"

/* ---- Xpulp or portable ------------------------------------------------- */
#ifdef PNN_XPULP
/* acc + x * y in one p.mac */
#define PNN_MAC(acc, x, y) ((acc) = __builtin_pulp_mac((x), (y), (acc)))
#else
#define PNN_MAC(acc, x, y) ((acc) += (int32_t)(x) * (int32_t)(y))
#endif

/* ---- splitting work over cores ------------------------------------------ */

/* The [begin, end) chunk of n items that belongs to `core`: chunks of
 * ceil(n / ncores), as PULP-NN splits (the last cores may get fewer, or
 * none). `quantum` rounds the chunk up to a multiple (4 output channels, so
 * every core keeps the 4x2 blocking). */
static inline void pnn_chunk(int32_t n, int32_t quantum, int core, int ncores,
                             int32_t *begin, int32_t *end)
{
    int32_t chunk, b, e;
    if (ncores < 1)
        ncores = 1;
    chunk = (n + ncores - 1) / ncores;
    chunk = (chunk + quantum - 1) / quantum * quantum;
    b = chunk * core;
    e = b + chunk;
    if (b > n) b = n;
    if (e > n) e = n;
    *begin = b;
    *end = e;
}

/* Split a tile of `pixels` output pixels x `channels` output channels over
 * the cores by pixels (PULP-NN's output rows, in raster order, `pq` at a
 * time) or by channels (`cq` at a time), whichever gives the busiest core
 * less work; on a tie by pixels, or with `channels_first` by channels (the
 * pointwise: each core then walks its few channel blocks over every pixel,
 * and a block's set-up serves more pixel pairs). Small late layers have
 * fewer rows than cores but many channels. Sets this core's [p0, p1) x
 * [c0, c1). Kernels, tests and the cost model's features share this rule. */
static inline void pnn_split(int32_t pixels, int32_t channels, int32_t pq, int32_t cq, int channels_first,
                             int core, int ncores, int32_t *p0, int32_t *p1, int32_t *c0, int32_t *c1)
{
    int32_t per_p = (pixels + ncores - 1) / ncores, per_c = (channels + ncores - 1) / ncores;
    int64_t by_p, by_c;
    per_p = (per_p + pq - 1) / pq * pq;
    per_c = (per_c + cq - 1) / cq * cq;
    if (per_p > pixels) per_p = pixels;
    if (per_c > channels) per_c = channels;
    by_p = (int64_t)per_p * channels;
    by_c = (int64_t)pixels * per_c;
    if (by_p < by_c || (by_p == by_c && !channels_first)) {
        pnn_chunk(pixels, pq, core, ncores, p0, p1);
        *c0 = 0;
        *c1 = channels;
    } else {
        *p0 = 0;
        *p1 = pixels;
        pnn_chunk(channels, cq, core, ncores, c0, c1);
    }
}

/* ---- requantization, one channel's constants hoisted ------------------ */

typedef struct {
    int32_t mul;
    int32_t shift;      /* with Requant.divisor: shift + (divisor << 6), see pnn_rq_apply */
    int64_t add;        /* add[c] plus the rounding term */
    int32_t zero_point;
    int32_t lo, hi;     /* the clamp before the zero point is added */
    int32_t rounding;   /* TSR_ROUND_*: TFLite's two take their own path, as PNN_RQ_NEG */
    int32_t neg_mul, neg_shift;
    int64_t neg_add;    /* a negative accumulator's (a LeakyRelu folded in) */
} pnn_rq_t;

/* the rounding of a layer with a multiplier for negative accumulators: the
 * path TFLite's roundings take (off the usual one, which stays as it is) */
#define PNN_RQ_NEG 64

static inline pnn_rq_t pnn_rq_channel(const tsr_requant_t *rq, int32_t c)
{
    pnn_rq_t p;
    int32_t i = rq->per_channel ? c : 0;
    p.mul = rq->mul[i];
    p.shift = rq->shift[i];
    p.add = rq->add ? (int64_t)rq->add[i] << rq->add_shift : 0;
    if (rq->rounding == TSR_ROUND_HALF_UP && p.shift > 0)
        p.add += (int64_t)1 << (p.shift - 1);
    p.zero_point = rq->zero_point;
    p.lo = rq->lo - rq->zero_point;
    p.hi = rq->hi - rq->zero_point;
    p.shift += rq->divisor << 6;      /* 0 without a divisor: no test on the usual path */
    p.rounding = rq->rounding;
    if (rq->neg_mul) {
        p.neg_mul = rq->neg_mul[0];
        p.neg_shift = rq->neg_shift[0];
        p.neg_add = (rq->add ? (int64_t)rq->add[i] << rq->add_shift : 0)
            + (rq->rounding == TSR_ROUND_HALF_UP && p.neg_shift > 0 ? (int64_t)1 << (p.neg_shift - 1) : 0);
        p.rounding = PNN_RQ_NEG + rq->rounding;
    }
    return p;
}

/* The division by Requant.divisor, out of line: the hot stores keep their
 * registers (inlined, it costs the 4x2 matmul's store several instructions
 * per output even where no layer divides). */
static __attribute__((noinline, unused)) int32_t pnn_rq_divide(int64_t v, const pnn_rq_t *p)
{
    return tsr_floor_div_clamp(v >> (p->shift & 63), p->shift >> 6, p->lo, p->hi);
}

/* TFLite's requantization (TSR_ROUND_TFLITE: a doubling high multiply and a
 * rounding shift; TSR_ROUND_TFLITE_DIV: average pooling's rounded division
 * by mul), clamped before the zero point like pnn_rq_apply. */
static inline int8_t pnn_rq_apply_tflite(int32_t acc, const pnn_rq_t *p)
{
    int32_t y;
    if (p->rounding >= PNN_RQ_NEG) {   /* tessera's rounding, a multiplier per sign */
        int64_t v = acc < 0 ? (int64_t)acc * p->neg_mul + p->neg_add : (int64_t)acc * p->mul + p->add;
        y = (int32_t)(v >> (acc < 0 ? p->neg_shift : p->shift));
    } else if (p->rounding == TSR_ROUND_TFLITE) {
        y = tsr_tfl_multiply(acc, p->mul, p->shift);
    } else {
        int32_t mag = ((acc < 0 ? -acc : acc) + p->mul / 2) / p->mul;
        y = acc < 0 ? -mag : mag;
    }
    if (y < p->lo) y = p->lo;
    if (y > p->hi) y = p->hi;
    return (int8_t)(y + p->zero_point);
}

/* tsr_requantize for an int32 accumulator: a 32x32->64 multiply, and, for
 * the usual shifts of 32 and more, the rest on the high word alone (floor
 * of v / 2^s is floor of (v >> 32) / 2^(s - 32)); the clamp comes before
 * the zero point so no sum can leave int32. */
static inline int8_t pnn_rq_apply(int32_t acc, const pnn_rq_t *p)
{
    if (p->rounding >= TSR_ROUND_TFLITE)
        return pnn_rq_apply_tflite(acc, p);
    int64_t v = (int64_t)acc * p->mul + p->add;
    int32_t y;
    if (p->shift >= 32) {
        if (__builtin_expect(p->shift >= 64, 0))
            y = pnn_rq_divide(v, p);   /* NEMO's division by 2^d - 1: one 32-bit division */
        else
            y = (int32_t)(v >> 32) >> (p->shift - 32);
    } else {
        v >>= p->shift;
        y = v < p->lo ? p->lo : v > p->hi ? p->hi : (int32_t)v;
    }
    if (y < p->lo) y = p->lo;
    if (y > p->hi) y = p->hi;
    return (int8_t)(y + p->zero_point);
}

/* pnn_rq_apply's usual case (tessera's rounding, a shift of 32 to 63, no
 * multiplier per sign, no divisor), which pnn_rq_is_high tells, in a few
 * instructions that inline where a loop takes them per output. */
static inline int pnn_rq_is_high(const pnn_rq_t *p)
{
    return p->rounding < TSR_ROUND_TFLITE && p->shift >= 32 && p->shift < 64;
}

static inline __attribute__((always_inline)) int8_t pnn_rq_high(int32_t acc, const pnn_rq_t *p)
{
    int32_t y = (int32_t)(((int64_t)acc * p->mul + p->add) >> 32) >> (p->shift - 32);
    if (y < p->lo) y = p->lo;
    if (y > p->hi) y = p->hi;
    return (int8_t)(y + p->zero_point);
}

/* Store output element i of channel c: requantized int8, or the int32
 * accumulator when the layer has no requantization. */
static inline void pnn_store(void *out, size_t i, int32_t acc, const pnn_rq_t *p,
                             const tsr_requant_t *rq)
{
    if (rq)
        ((int8_t *)out)[i] = pnn_rq_apply(acc, p);
    else
        ((int32_t *)out)[i] = acc;
}

/* Padding in im2col buffers is stored as -input_offset, so that x + offset
 * is 0 there and the matmul needs no bounds checks; that needs the offset
 * in [-127, 128] (it is minus the zero point of an int8 or shifted uint8
 * tensor). Other offsets take a direct loop. */
static inline int pnn_offset_padable(int32_t off)
{
    return off >= -127 && off <= 128;
}

/* The 4x2 matmul: output channels [c0, c1) of pixels x0 and x1 (x1 may be
 * NULL for a single pixel), rows of K int8 inputs, weights [out_c][K].
 * Stores pixel p's channel c at out[o_p + c]. See matmul.c. */
void pnn_matmul(const int8_t *x0, const int8_t *x1, int32_t K, const int8_t *w,
                const int32_t *bias, int32_t c0, int32_t c1, int32_t off, void *out,
                size_t o0, size_t o1, const tsr_requant_t *rq);

#endif /* TESSERA_PNN_COMMON_H */
