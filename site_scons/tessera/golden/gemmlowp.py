"""gemmlowp's 32-bit fixed-point arithmetic as TFLite's reference int8
SOFTMAX uses it (reference_ops::Softmax), in Python integers.

Per row: d = max - x; E[d] = exp(-d * beta * s_in) in Q0.31, a function of
d alone (softmax_exp_table, built by the frontend); their sum in Q12.19
(each E rounded by 2^-12); the sum's reciprocal by Newton-Raphson in fixed
point; each output RDBPOT(SRDHM(reciprocal, E[d]), bits over unit + 23)
plus the zero point (-128). The golden model's softmax with rounding
"tflite" (ir.Layer) is softmax_rows; kernels/reference/elementwise.c does
the same in C.
"""

import numpy as np

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def _trunc_div(a, b):
    q = abs(a) // b
    return q if a >= 0 else -q


def rdbpot(x, e):
    """RoundingDivideByPOT: x / 2^e rounded half away from zero."""
    mask = (1 << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if remainder > threshold else 0)


def wrap32(v):
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def srdhm32(a, b):
    if a == b == I32_MIN:
        return I32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return wrap32(_trunc_div(ab + nudge, 1 << 31))


def _mul_pot(x, exponent):
    """SaturatingRoundingMultiplyByPOT."""
    if exponent <= 0:
        return rdbpot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return I32_MAX
    if x < -threshold:
        return I32_MIN
    return wrap32(x << exponent)


def _exp_quarter(a):
    """exp(a) for a in [-1/4, 0), Q0.31 in and out."""
    constant_term, one_third = 1895147668, 715827883
    x = wrap32(a + (1 << 28))
    x2 = srdhm32(x, x)
    x3 = srdhm32(x2, x)
    x4 = srdhm32(x2, x2)
    x4_over_4 = _mul_pot(x4, -2)
    poly = _mul_pot(wrap32(srdhm32(wrap32(x4_over_4 + x3), one_third) + x2), -1)
    return wrap32(constant_term + srdhm32(constant_term, wrap32(x + poly)))


_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
           (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits=5):
    """gemmlowp::exp_on_negative_values for a Q(bits).(31 - bits) input, Q0.31 output."""
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = wrap32((a & (quarter - 1)) - quarter)
    result = _exp_quarter(_mul_pot(a_mod, integer_bits))
    remainder = wrap32(a_mod - a)
    for exponent, multiplier in _BARREL:
        if integer_bits > exponent and remainder & (1 << (frac + exponent)):
            result = srdhm32(result, multiplier)
    if integer_bits > 5 and a < -(1 << (36 - integer_bits)):
        result = 0           # below -32: gemmlowp's clamp
    return I32_MAX if a == 0 else result


def _one_over_one_plus_x(a):
    """gemmlowp::one_over_one_plus_x_for_x_in_0_1, Q0.31."""
    s = a + I32_MAX   # RoundingHalfSum(a, One): (s + sign(s)) / 2 toward zero
    half_denominator = wrap32((s + 1) // 2 if s >= 0 else -((1 - s) // 2))
    x = wrap32(1515870810 + srdhm32(half_denominator, -1010580540))
    for _ in range(3):
        one_minus = wrap32((1 << 29) - srdhm32(half_denominator, x))
        x = wrap32(x + _mul_pot(srdhm32(x, one_minus), 2))
    return _mul_pot(x, 1)


def softmax_rows(x, table, zero_point=-128, lo=-128, hi=127):
    """The reference int8 softmax over the last axis of an int array (TFLite
    requires the output scale 1/256 and zero point -128)."""
    x = np.asarray(x, dtype=np.int64)
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    for r, row in enumerate(rows):
        e = [table[int(row.max() - v)] for v in row]
        total = 0
        for v in e:
            total = wrap32(total + rdbpot(v, 12))
        headroom = 32 - int(total & 0xFFFFFFFF).bit_length()
        bits_over_unit = 12 - headroom
        shifted = wrap32(((total & 0xFFFFFFFF) << headroom) - (1 << 31))
        scale = _one_over_one_plus_x(shifted)
        exponent = bits_over_unit + 31 - 8
        for c, v in enumerate(e):
            out[r, c] = min(hi, max(lo, rdbpot(srdhm32(scale, v), exponent) + zero_point))
    return out.reshape(x.shape)


# ---- 32-bit logistic and tanh (gemmlowp's fixedpoint.h, int32 raw values) --

def _one_minus_x_over_one_plus_x(a):
    """gemmlowp::one_minus_x_over_one_plus_x_for_x_in_0_1, Q0.31."""
    s = a + I32_MAX
    half_denominator = wrap32((s + 1) // 2 if s >= 0 else -((1 - s) // 2))
    x = wrap32(1515870810 + srdhm32(half_denominator, -1010580540))
    for _ in range(3):
        one_minus = wrap32((1 << 29) - srdhm32(half_denominator, x))
        x = wrap32(x + _mul_pot(srdhm32(x, one_minus), 2))
    return _mul_pot(wrap32(x - (1 << 29)), 2)


def logistic32(a, integer_bits):
    """gemmlowp::logistic of a Q(bits).(31 - bits) int32 -> Q0.31."""
    if a == 0:
        return 1 << 30
    absolute = a if a > 0 else wrap32(-a)
    pos = _one_over_one_plus_x(exp_on_negative_values(wrap32(-absolute), integer_bits))
    return pos if a > 0 else wrap32(I32_MAX - pos)


def tanh32(a, integer_bits):
    """gemmlowp::tanh of a Q(bits).(31 - bits) int32 -> Q0.31."""
    if a == 0:
        return 0
    n = a if a < 0 else wrap32(-a)
    t = _one_minus_x_over_one_plus_x(exp_on_negative_values(n, integer_bits + 1))
    return wrap32(-t) if a < 0 else t
