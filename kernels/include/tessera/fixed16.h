/*
 * gemmlowp's 16-bit fixed-point logistic and tanh as TFLite's integer LSTM
 * computes its gates (tensor_utils::ApplySigmoid: Q3.12 -> Q0.15;
 * ApplyTanh: Q(bits).(15 - bits) -> Q0.15), and the int16 helpers of its
 * cell update. Written from the arithmetic (site_scons/tessera/golden/fixed16.py
 * states it; tests/test_recurrent.py checks these against it on every input):
 * additions wrap to 16 bits, products are the saturating rounding doubling
 * high multiply, constants are the int32 ones rounded by 2^-16.
 */
#ifndef TESSERA_FIXED16_H
#define TESSERA_FIXED16_H

#include <stdint.h>

static inline int32_t tsr_w16(int32_t x)
{
    return (int16_t)(uint16_t)(uint32_t)x;
}

static inline int32_t tsr_sat16(int32_t x)
{
    return x < -32768 ? -32768 : x > 32767 ? 32767 : x;
}

/* SaturatingRoundingDoublingHighMul on int16 */
static inline int32_t tsr_srdhm16(int32_t a, int32_t b)
{
    if (a == -32768 && b == -32768)
        return 32767;
    int32_t ab = a * b;
    int32_t num = ab + (ab >= 0 ? (1 << 14) : (1 - (1 << 14)));
    return tsr_w16(num / (1 << 15));   /* C division: toward zero */
}

/* RoundingDivideByPOT: x / 2^e, halves away from zero (0 <= e <= 31) */
static inline int32_t tsr_rdbpot(int32_t x, int32_t e)
{
    int32_t mask = (int32_t)(((int64_t)1 << e) - 1);
    int32_t threshold = (mask >> 1) + (x < 0);
    return (x >> e) + ((x & mask) > threshold);
}

/* SaturatingRoundingMultiplyByPOT on int16: e > 0 shifts left saturating */
static inline int32_t tsr_mul_pot16(int32_t x, int32_t e)
{
    if (e < 0)
        return tsr_rdbpot(x, -e);
    if (e == 0)
        return x;
    int32_t threshold = (1 << (15 - e)) - 1;
    return x > threshold ? 32767 : x < -threshold ? -32768 : tsr_w16(x << e);
}

/* exp on [-1/4, 0), Q0.15; the constants are gemmlowp's int32 ones rounded
 * to 16 bits: exp(-1/8) 28918, 1/3 10923 */
static inline int32_t tsr_exp_quarter16(int32_t a)
{
    const int32_t constant_term = 28918, third = 10923;
    int32_t x = tsr_w16(a + (1 << 12));
    int32_t x2 = tsr_srdhm16(x, x);
    int32_t x3 = tsr_srdhm16(x2, x);
    int32_t x4 = tsr_srdhm16(x2, x2);
    int32_t x4_over_4 = tsr_mul_pot16(x4, -2);
    int32_t poly = tsr_mul_pot16(tsr_w16(tsr_srdhm16(tsr_w16(x4_over_4 + x3), third) + x2), -1);
    return tsr_sat16(constant_term + tsr_srdhm16(constant_term, tsr_w16(x + poly)));
}

/* exp(a), a <= 0 in Q(bits).(15 - bits), Q0.15 result. Multipliers
 * exp(-1/4) .. exp(-16) in Q0.15: 25520 19875 12055 4435 600 11 0 */
static inline int32_t tsr_exp_neg16(int32_t a, int32_t bits)
{
    static const int32_t mult[7] = {25520, 19875, 12055, 4435, 600, 11, 0};
    int32_t frac = 15 - bits;
    int32_t quarter = 1 << (frac - 2);
    int32_t a_mod = tsr_w16((a & (quarter - 1)) - quarter);
    int32_t result = tsr_exp_quarter16(tsr_mul_pot16(a_mod, bits));
    int32_t remainder = tsr_w16(a_mod - a);
    for (int32_t k = 0; k < 7; k++) {
        int32_t exponent = k - 2;
        if (bits > exponent && ((remainder >> (frac + exponent)) & 1))
            result = tsr_srdhm16(result, mult[k]);
    }
    if (bits > 5) {
        int32_t clamp = tsr_w16(tsr_rdbpot(-(1 << (36 - bits)), 16));
        if (a < clamp)
            result = 0;
    }
    return a == 0 ? 32767 : result;
}

/* Newton-Raphson reciprocal of (1 + a) / 2 in Q2.13, a Q0.15 in [0, 1);
 * 48/17 and -32/17 in Q2.13: 23130, -15420 */
static inline int32_t tsr_newton16(int32_t a)
{
    int32_t s = a + 32767;
    int32_t half = tsr_w16(s >= 0 ? (s + 1) / 2 : (s - 1) / 2);
    int32_t x = tsr_w16(23130 + tsr_srdhm16(half, -15420));
    for (int k = 0; k < 3; k++) {
        int32_t one_minus = tsr_w16((1 << 13) - tsr_srdhm16(half, x));
        x = tsr_w16(x + tsr_mul_pot16(tsr_srdhm16(x, one_minus), 2));
    }
    return x;
}

/* gemmlowp::logistic of a Q3.12 int16 -> Q0.15 */
static inline int32_t tsr_sigmoid16(int32_t a)
{
    if (a == 0)
        return 1 << 14;
    int32_t absolute = a > 0 ? a : tsr_w16(-a);
    int32_t pos = tsr_mul_pot16(tsr_newton16(tsr_exp_neg16(tsr_w16(-absolute), 3)), 1);
    return a > 0 ? pos : tsr_w16(32767 - pos);
}

/* gemmlowp::tanh of a Q(bits).(15 - bits) int16 -> Q0.15 (0 <= bits <= 6) */
static inline int32_t tsr_tanh16(int32_t a, int32_t bits)
{
    if (a == 0)
        return 0;
    int32_t n = a < 0 ? a : tsr_w16(-a);
    int32_t t = tsr_mul_pot16(tsr_w16(tsr_newton16(tsr_exp_neg16(n, bits + 1)) - (1 << 13)), 2);
    return a < 0 ? tsr_w16(-t) : t;
}

#endif /* TESSERA_FIXED16_H */
