/*
 * The ARMv7E-M DSP instructions tessera's Cortex-M kernels use, through
 * ACLE intrinsics (<arm_acle.h>), with portable C equivalents so that the
 * same kernels build on the host, where the tests check them against the
 * golden model quickly (QEMU runs check the real instructions).
 *
 * Packed operands: "q15x2" is two int16 lanes in a word (low lane first).
 * sxtb16(x) sign-extends bytes 0 and 2 of x into lanes, sxtb16_ror8(x)
 * bytes 1 and 3; so a word of 4 int8 values v0..v3 becomes the pair of
 * words (v0, v2), (v1, v3). Vectors converted to int16 are stored in that
 * "reordered" order, so that smlad of matching words adds all four
 * products without any repacking.
 */
#ifndef TSR_DSP_H
#define TSR_DSP_H

#include <stdint.h>
#include <string.h>

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#include <arm_acle.h>
#define TSR_HAVE_DSP 1
#else
#define TSR_HAVE_DSP 0
#endif

#define TSR_INLINE static inline __attribute__((always_inline))

/* word loads and stores at any alignment (one ldr/str on ARMv7-M) */
TSR_INLINE uint32_t tsr_ld32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

TSR_INLINE void tsr_st32(void *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

#if TSR_HAVE_DSP

TSR_INLINE int32_t tsr_sxtb16(uint32_t x)
{
    return __sxtb16((int32_t)x);
}

/* the rotation is part of the instruction; GCC does not fold it from C */
TSR_INLINE int32_t tsr_sxtb16_ror8(uint32_t x)
{
    int32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}

TSR_INLINE int32_t tsr_sxtab16(int32_t a, uint32_t x)
{
    return __sxtab16(a, (int32_t)x);
}

TSR_INLINE int32_t tsr_sxtab16_ror8(int32_t a, uint32_t x)
{
    int32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(x));
    return r;
}

TSR_INLINE int32_t tsr_smlad(int32_t a, int32_t b, int32_t acc)
{
    return __smlad(a, b, acc);
}

TSR_INLINE int32_t tsr_smlabb(int32_t a, int32_t b, int32_t acc)
{
    return __smlabb(a, b, acc);
}

TSR_INLINE int32_t tsr_smlatt(int32_t a, int32_t b, int32_t acc)
{
    return __smlatt(a, b, acc);
}

/* the high word of h * 2^32 + a * b, truncated (smmla) or rounded (smmlar) */
TSR_INLINE int32_t tsr_smmla(int32_t a, int32_t b, int32_t h)
{
    int32_t r;
    __asm__("smmla %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(h));
    return r;
}

TSR_INLINE int32_t tsr_smmlar(int32_t a, int32_t b, int32_t h)
{
    int32_t r;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(h));
    return r;
}

/* lane-wise int16 sum */
TSR_INLINE int32_t tsr_sadd16(int32_t a, int32_t b)
{
    return __sadd16(a, b);
}

/* bytewise signed maximum: ssub8 sets a GE flag per lane, sel picks by it
 * (one asm block, so nothing can come between them) */
TSR_INLINE uint32_t tsr_max8x4(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
}

#else /* portable equivalents, lane by lane */

TSR_INLINE int32_t tsr_lo16(int32_t x)
{
    return (int16_t)(uint16_t)((uint32_t)x & 0xFFFFu);
}

TSR_INLINE int32_t tsr_hi16(int32_t x)
{
    return (int16_t)(uint16_t)((uint32_t)x >> 16);
}

TSR_INLINE int32_t tsr_pack16(int32_t lo, int32_t hi)
{
    return (int32_t)(((uint32_t)(uint16_t)lo) | ((uint32_t)(uint16_t)hi << 16));
}

TSR_INLINE int32_t tsr_sxtb16(uint32_t x)
{
    return tsr_pack16((int8_t)(x & 0xFF), (int8_t)((x >> 16) & 0xFF));
}

TSR_INLINE int32_t tsr_sxtb16_ror8(uint32_t x)
{
    return tsr_sxtb16((x >> 8) | (x << 24));
}

TSR_INLINE int32_t tsr_sxtab16(int32_t a, uint32_t x)
{
    return tsr_pack16(tsr_lo16(a) + (int8_t)(x & 0xFF), tsr_hi16(a) + (int8_t)((x >> 16) & 0xFF));
}

TSR_INLINE int32_t tsr_sxtab16_ror8(int32_t a, uint32_t x)
{
    return tsr_sxtab16(a, (x >> 8) | (x << 24));
}

TSR_INLINE int32_t tsr_smlad(int32_t a, int32_t b, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(tsr_lo16(a) * tsr_lo16(b)) +
                     (uint32_t)(tsr_hi16(a) * tsr_hi16(b)));
}

TSR_INLINE int32_t tsr_smlabb(int32_t a, int32_t b, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(tsr_lo16(a) * tsr_lo16(b)));
}

TSR_INLINE int32_t tsr_smlatt(int32_t a, int32_t b, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(tsr_hi16(a) * tsr_hi16(b)));
}

TSR_INLINE int32_t tsr_smmla(int32_t a, int32_t b, int32_t h)
{
    return (int32_t)((((int64_t)h * ((int64_t)1 << 32)) + (int64_t)a * b) >> 32);
}

TSR_INLINE int32_t tsr_smmlar(int32_t a, int32_t b, int32_t h)
{
    return (int32_t)((((int64_t)h * ((int64_t)1 << 32)) + (int64_t)a * b + 0x80000000LL) >> 32);
}

TSR_INLINE int32_t tsr_sadd16(int32_t a, int32_t b)
{
    return tsr_pack16(tsr_lo16(a) + tsr_lo16(b), tsr_hi16(a) + tsr_hi16(b));
}

TSR_INLINE uint32_t tsr_max8x4(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    for (int i = 0; i < 32; i += 8) {
        int8_t x = (int8_t)((a >> i) & 0xFF), y = (int8_t)((b >> i) & 0xFF);
        r |= (uint32_t)(uint8_t)(x > y ? x : y) << i;
    }
    return r;
}

#endif /* TSR_HAVE_DSP */

/* Two copies of a 16-bit value, one per lane. */
TSR_INLINE int32_t tsr_dup16(int32_t v)
{
    return (int32_t)(((uint32_t)(uint16_t)v) | ((uint32_t)(uint16_t)v << 16));
}

/*
 * Requantization, CMSIS-NN's convention in (shift: left shift, so
 * s = 31 - shift >= 1 is the right shift), tessera's arithmetic out:
 *     (acc * mul + 2^(s-1)) >> s      computed exactly.
 * For s >= 33 the rounding constant lands in the high word of the 64-bit
 * product, so only that word is needed:
 *     floor((v + 2^(s-1)) / 2^s) = (floor(v / 2^32) + 2^(s-33)) >> (s - 32).
 * That is a smull, an add and a shift; tsr_rq_t keeps the two constants.
 * The result is saturated to +-2^24, far outside any clamp range, so the
 * caller may add a zero point in 32 bits.
 */
typedef struct {
    int32_t mul;
    int32_t round;    /* 2^(s-33) on the fast path, else unused */
    int32_t shift;    /* s - 32 on the fast path, else s */
    int32_t fast;
} tsr_rq_t;

TSR_INLINE tsr_rq_t tsr_rq_make(int32_t mul, int32_t cmsis_shift)
{
    tsr_rq_t r;
    int32_t s = 31 - cmsis_shift;
    r.mul = mul;
    r.fast = s >= 33;
    r.round = r.fast ? (int32_t)1 << (s - 33) : 0;
    r.shift = r.fast ? s - 32 : s;
    return r;
}

TSR_INLINE int32_t tsr_rq_apply(int32_t acc, tsr_rq_t r)
{
    if (r.fast) {
        int32_t hi = (int32_t)(((int64_t)acc * r.mul) >> 32);
        return (hi + r.round) >> r.shift;
    }
    int64_t v = ((int64_t)acc * r.mul + ((int64_t)1 << (r.shift - 1))) >> r.shift;
    if (v > (1 << 24))
        v = 1 << 24;
    if (v < -(1 << 24))
        v = -(1 << 24);
    return (int32_t)v;
}

/* saturate to int8 (one ssat) */
TSR_INLINE int32_t tsr_sat8(int32_t v)
{
#if TSR_HAVE_DSP
    return __ssat(v, 8);
#else
    return v < -128 ? -128 : v > 127 ? 127 : v;
#endif
}

TSR_INLINE int32_t tsr_clamp(int32_t v, int32_t lo, int32_t hi)
{
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

#endif /* TSR_DSP_H */
