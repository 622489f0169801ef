"""gemmlowp's 16-bit fixed-point logistic and tanh, as TFLite's integer LSTM
(tensor_utils::ApplySigmoid / ApplyTanh) computes its gates, in NumPy.

A FixedPoint<int16, I> holds raw / 2^(15 - I). Every operation below is the
scalar int16 one of gemmlowp's fixedpoint.h, vectorized: additions wrap to
16 bits, products are the saturating rounding doubling high multiply
((a * b + nudge) / 2^15, the division toward zero), constants are the
int32 ones rounded by 2^-16, and Rescale / SaturatingRoundingMultiplyByPOT
shift left saturating or right rounding (halves away from zero).

logistic(I=3) maps a Q3.12 gate pre-activation to Q0.15; tanh(I) maps QI.(15-I)
to Q0.15 (the cell gate: I = 3; the cell state's tanh: I = 15 + cell scale
exponent). Both are functions of one int16, so the golden model uses their
65536-entry tables (`sigmoid_table`, `tanh_table`); the C kernels compute the
same arithmetic per value (kernels/include/tessera/fixed16.h), checked against
these tables over every input by tests/test_recurrent.py.
"""

from functools import lru_cache

import numpy as np

I16_MIN, I16_MAX = -(1 << 15), (1 << 15) - 1


def wrap16(x):
    return ((np.asarray(x, dtype=np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def _rdbpot32(x, e):
    """RoundingDivideByPOT on an int32 scalar (the constants' rescale)."""
    mask = (1 << e) - 1
    return (x >> e) + (1 if (x & mask) > (mask >> 1) + (1 if x < 0 else 0) else 0)


def _const(raw32):
    """GEMMLOWP_CHECKED_FIXEDPOINT_CONSTANT for int16: the int32 constant
    rounded by 2^-16."""
    return int(wrap16(_rdbpot32(raw32, 16)))


def _srdhm(a, b):
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    num = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    q = np.where(num >= 0, num >> 15, -((-num) >> 15))
    return np.where((a == I16_MIN) & (b == I16_MIN), I16_MAX, wrap16(q))


def rdbpot(x, e):
    """RoundingDivideByPOT: x / 2^e, halves away from zero."""
    x = np.asarray(x, dtype=np.int64)
    if e == 0:
        return x
    mask = (1 << e) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + ((x & mask) > threshold)


def _mul_pot(x, e):
    """SaturatingRoundingMultiplyByPOT<e> on int16."""
    x = np.asarray(x, dtype=np.int64)
    if e < 0:
        return rdbpot(x, -e)
    if e == 0:
        return x
    threshold = (1 << (15 - e)) - 1
    return np.where(x > threshold, I16_MAX, np.where(x < -threshold, I16_MIN, wrap16(x << e)))


def _one(bits):
    return I16_MAX if bits == 0 else 1 << (15 - bits)


def _exp_quarter(a):
    """exp on [-1/4, 0): Q0.15 in and out."""
    constant_term, third = _const(1895147668), _const(715827883)
    x = wrap16(a + (1 << 12))
    x2 = _srdhm(x, x)
    x3 = _srdhm(x2, x)
    x4 = _srdhm(x2, x2)
    x4_over_4 = _mul_pot(x4, -2)
    poly = _mul_pot(wrap16(_srdhm(wrap16(x4_over_4 + x3), third) + x2), -1)
    return np.clip(constant_term + _srdhm(constant_term, wrap16(x + poly)), I16_MIN, I16_MAX)


_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
           (3, 720401), (4, 242))


def exp_on_negative_values(a, bits):
    """exp(a) for a <= 0 held as Q(bits).(15 - bits); Q0.15 result."""
    frac = 15 - bits
    quarter = 1 << (frac - 2)
    a = np.asarray(a, dtype=np.int64)
    a_mod = wrap16((a & (quarter - 1)) - quarter)
    result = _exp_quarter(_mul_pot(a_mod, bits))
    remainder = wrap16(a_mod - a)
    for exponent, multiplier in _BARREL:
        if bits > exponent:
            bit = (remainder >> (frac + exponent)) & 1
            result = np.where(bit != 0, _srdhm(result, _const(multiplier)), result)
    if bits > 5:
        clamp = _const(-(1 << (36 - bits)))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, I16_MAX, result)


def _newton(a):
    """The Newton-Raphson reciprocal of (1 + a) / 2 in Q2.13 (three steps)."""
    s = a + I16_MAX
    half = wrap16(np.where(s >= 0, (s + 1) // 2, -((1 - s) // 2)))
    x = wrap16(_const(1515870810) + _srdhm(half, _const(-1010580540)))
    one2 = _one(2)
    for _ in range(3):
        one_minus = wrap16(one2 - _srdhm(half, x))
        x = wrap16(x + _mul_pot(_srdhm(x, one_minus), 2))
    return x


def logistic(a, bits=3):
    """gemmlowp::logistic of a Q(bits).(15 - bits) int16 array -> Q0.15."""
    a = np.asarray(a, dtype=np.int64)
    positive = a > 0
    absolute = np.where(positive, a, wrap16(-a))
    e = exp_on_negative_values(wrap16(-absolute), bits)
    # one_over_one_plus_x_for_x_in_0_1: Rescale<0>(ExactMulByPot<-1>(x)), x Q2.13 -> Q1.14 -> Q0.15
    pos = _mul_pot(_newton(e), 1)
    neg = wrap16(I16_MAX - pos)
    return np.where(a == 0, 1 << 14, np.where(positive, pos, neg))


def tanh(a, bits):
    """gemmlowp::tanh of a Q(bits).(15 - bits) int16 array -> Q0.15."""
    a = np.asarray(a, dtype=np.int64)
    negative = a < 0
    n = np.where(negative, a, wrap16(-a))
    e = exp_on_negative_values(n, bits + 1)       # ExactMulByPot<1>: the same raw, one more integer bit
    # one_minus_x_over_one_plus_x_for_x_in_0_1: Rescale<0>(x - One) of Q2.13
    t = _mul_pot(wrap16(_newton(e) - _one(2)), 2)
    return np.where(a == 0, 0, np.where(negative, wrap16(-t), t))


_ALL = np.arange(I16_MIN, I16_MAX + 1, dtype=np.int64)


@lru_cache(maxsize=None)
def sigmoid_table():
    """logistic(Q3.12) for every int16 input, indexed by input + 32768."""
    return logistic(_ALL, 3).astype(np.int16)


@lru_cache(maxsize=None)
def tanh_table(bits):
    """tanh(Q(bits).(15 - bits)) for every int16 input, indexed by input + 32768."""
    if not 0 <= bits <= 6:
        raise ValueError(f"tanh with {bits} integer bits (TFLite's integer LSTM takes 0 to 6)")
    return tanh(_ALL, bits).astype(np.int16)
