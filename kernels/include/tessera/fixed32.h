/*
 * gemmlowp's 32-bit fixed-point logistic and tanh (Q(bits).(31 - bits) in,
 * Q0.31 out), for the ONNX recurrent step whose states stay in fixed point
 * between steps (site_scons/tessera/golden/recurrent.py onnx_cell states it;
 * golden/gemmlowp.py is the NumPy form these are checked against, on random
 * inputs and on the models, by tests/test_recurrent.py). Additions wrap to
 * 32 bits; products are TFLite's SRDHM (tsr_tfl_srdhm, kernels.h).
 */
#ifndef TESSERA_FIXED32_H
#define TESSERA_FIXED32_H

#include <stdint.h>

#include "tessera/kernels.h"

static inline int32_t tsr_w32(int64_t x)
{
    return (int32_t)(uint32_t)(uint64_t)x;
}

/* SaturatingRoundingMultiplyByPOT on int32 */
static inline int32_t tsr_mul_pot32(int32_t x, int32_t e)
{
    if (e < 0)
        return tsr_tfl_rdbpot(x, -e);
    if (e == 0)
        return x;
    int32_t threshold = (int32_t)(((int64_t)1 << (31 - e)) - 1);
    return x > threshold ? INT32_MAX : x < -threshold ? INT32_MIN : tsr_w32((int64_t)x << e);
}

/* exp on [-1/4, 0), Q0.31 */
static inline int32_t tsr_exp_quarter32(int32_t a)
{
    const int32_t constant_term = 1895147668, third = 715827883;
    int32_t x = tsr_w32((int64_t)a + (1 << 28));
    int32_t x2 = tsr_tfl_srdhm(x, x);
    int32_t x3 = tsr_tfl_srdhm(x2, x);
    int32_t x4 = tsr_tfl_srdhm(x2, x2);
    int32_t x4_over_4 = tsr_mul_pot32(x4, -2);
    int32_t poly = tsr_mul_pot32(tsr_w32((int64_t)tsr_tfl_srdhm(tsr_w32((int64_t)x4_over_4 + x3), third) + x2), -1);
    return tsr_w32((int64_t)constant_term + tsr_tfl_srdhm(constant_term, tsr_w32((int64_t)x + poly)));
}

/* exp(a), a <= 0 in Q(bits).(31 - bits), Q0.31 */
static inline int32_t tsr_exp_neg32(int32_t a, int32_t bits)
{
    static const int32_t mult[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
    int32_t frac = 31 - bits;
    int32_t quarter = 1 << (frac - 2);
    int32_t a_mod = tsr_w32((int64_t)(a & (quarter - 1)) - quarter);
    int32_t result = tsr_exp_quarter32(tsr_mul_pot32(a_mod, bits));
    int32_t remainder = tsr_w32((int64_t)a_mod - a);
    for (int32_t k = 0; k < 7; k++) {
        int32_t exponent = k - 2;
        if (bits > exponent && ((remainder >> (frac + exponent)) & 1))
            result = tsr_tfl_srdhm(result, mult[k]);
    }
    if (bits > 5 && a < -(1 << (36 - bits)))
        result = 0;
    return a == 0 ? INT32_MAX : result;
}

/* the Newton-Raphson reciprocal of (1 + a) / 2 in Q2.29, a Q0.31 in [0, 1) */
static inline int32_t tsr_newton32(int32_t a)
{
    int64_t s = (int64_t)a + INT32_MAX;
    int32_t half = tsr_w32(s >= 0 ? (s + 1) / 2 : (s - 1) / 2);
    int32_t x = tsr_w32((int64_t)1515870810 + tsr_tfl_srdhm(half, -1010580540));
    for (int k = 0; k < 3; k++) {
        int32_t one_minus = tsr_w32((int64_t)(1 << 29) - tsr_tfl_srdhm(half, x));
        x = tsr_w32((int64_t)x + tsr_mul_pot32(tsr_tfl_srdhm(x, one_minus), 2));
    }
    return x;
}

/* gemmlowp::logistic, Q(bits).(31 - bits) -> Q0.31 */
static inline int32_t tsr_sigmoid32(int32_t a, int32_t bits)
{
    if (a == 0)
        return 1 << 30;
    int32_t absolute = a > 0 ? a : tsr_w32(-(int64_t)a);
    int32_t pos = tsr_mul_pot32(tsr_newton32(tsr_exp_neg32(tsr_w32(-(int64_t)absolute), bits)), 1);
    return a > 0 ? pos : tsr_w32((int64_t)INT32_MAX - pos);
}

/* gemmlowp::tanh, Q(bits).(31 - bits) -> Q0.31 */
static inline int32_t tsr_tanh32(int32_t a, int32_t bits)
{
    if (a == 0)
        return 0;
    int32_t n = a < 0 ? a : tsr_w32(-(int64_t)a);
    int32_t t = tsr_mul_pot32(tsr_w32((int64_t)tsr_newton32(tsr_exp_neg32(n, bits + 1)) - (1 << 29)), 2);
    return a < 0 ? tsr_w32(-(int64_t)t) : t;
}

#endif /* TESSERA_FIXED32_H */
