"""TFLite's int8 LOGISTIC and HARD_SWISH as 256-entry tables, and its
reference int8 SOFTMAX.

Both are int8 -> int8 functions of one value, so the IR's `lut` op (issue
10) computes them exactly from a table filled here at build time, for every
input, with TFLite's own recipe:

- LOGISTIC: the interpreter fills a table in float32 (PopulateLookupTable):
  x = s_in * (q - zp_in), y = 1 / (1 + exp(-x)), q_out = round(y * (1 / s_out))
  + zp_out (half away from zero), clamped.
- HARD_SWISH: the integer recipe of reference_ops::HardSwish, in 16-bit
  fixed point (HardSwishPrepare's multipliers, a saturating rounding
  doubling high multiply for the input and the "relu-ish" factor, a
  truncating one for their product, a rounding shift).

- SOFTMAX: reference_ops::Softmax's gemmlowp fixed point (see below): the
  exponentials are a table of d = max - x, the rest needs the row's sum and
  its fixed-point reciprocal, which no IR op computes yet (issue 10's
  softmax divides exactly), so a model's final SOFTMAX is dropped
  (drop_final_softmax) and this recipe is only checked, not built.

tests/test_tflite.py compares all three with the TFLite interpreter.
"""

import numpy as np

from .tflite import quantize_multiplier

I16_MIN, I16_MAX = -(1 << 15), (1 << 15) - 1


def _round_away(x):
    return np.where(x >= 0, np.floor(x + np.float32(0.5)), -np.floor(-x + np.float32(0.5)))


def logistic_table(s_in, zp_in, s_out, zp_out):
    q = np.arange(-128, 128, dtype=np.int32)
    x = np.float32(s_in) * (q - np.int32(zp_in)).astype(np.float32)
    y = np.float32(1) / (np.float32(1) + np.exp(-x, dtype=np.float32))
    r = _round_away((y * (np.float32(1) / np.float32(s_out))).astype(np.float32))
    return [int(v) for v in np.clip(r.astype(np.int64) + zp_out, -128, 127)]


# ---- 16-bit fixed point (gemmlowp's int16 forms) ---------------------------

def _sat16(v):
    return max(I16_MIN, min(I16_MAX, v))


def _to_i16(v):
    """static_cast<int16_t>: wrap to 16 bits."""
    return ((v + (1 << 15)) & 0xFFFF) - (1 << 15)


def _trunc_div(a, b):
    q = abs(a) // b
    return q if a >= 0 else -q


def _srdhm16(a, b):
    if a == b == I16_MIN:
        return I16_MAX
    ab = a * b
    nudge = (1 << 14) if ab >= 0 else 1 - (1 << 14)
    return _to_i16(_trunc_div(ab + nudge, 1 << 15))


def _sdhm16(a, b):
    """SaturatingDoublingHighMul: truncating toward zero."""
    if a == b == I16_MIN:
        return I16_MAX
    return _to_i16(_trunc_div(a * b, 1 << 15))


def _rdbpot(x, e):
    mask = (1 << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if remainder > threshold else 0)


def _downscale16(m):
    """DownScaleInt32ToInt16Multiplier."""
    if m >= (1 << 31) - 1 - (1 << 15):
        return I16_MAX
    return (m + (1 << 15)) >> 16


def _tflite_exponent(real):
    """QuantizeMultiplier's (multiplier, exponent)."""
    mul, shift = quantize_multiplier(real)
    return mul, 31 - shift


def hard_swish_table(s_in, zp_in, s_out, zp_out):
    f32 = np.float32
    hires = f32(1.0 / 128.0) * f32(s_in)
    out_mul, out_exp = _tflite_exponent(float(hires / f32(s_out)))
    relu_mul, relu_exp = _tflite_exponent(float(hires / f32(3.0 / 32768.0)))
    if out_exp > 0:
        raise ValueError("HARD_SWISH output multiplier above 1")
    out_mul16, relu_mul16 = _downscale16(out_mul), _downscale16(relu_mul)
    table = []
    for q in range(-128, 128):
        v = _to_i16(q - zp_in)
        hi = _to_i16(v * (1 << 7))
        pre_out = _srdhm16(hi, out_mul16)
        r = hi
        if relu_exp > 0:
            r = _sat16(r * (1 << (relu_exp - 1)))
        r = _srdhm16(r, relu_mul16)
        if relu_exp > 0:
            r = _sat16(r * 2)
        if relu_exp < 0:
            r = _rdbpot(r, -relu_exp)
        r = (r + (1 << 15)) >> 1
        y = _rdbpot(_sdhm16(r, pre_out), -out_exp) + zp_out
        table.append(int(min(127, max(-128, y))))
    return table


# ---- SOFTMAX: reference_ops::Softmax for int8 (gemmlowp fixed point) -------
#
# Per row: d = max - x; E[d] = exp(-d * beta * s_in) in Q0.31 (a function
# of d alone: softmax_exp_table); their sum in Q12.19 (each E rounded by
# 2^-12); the sum's reciprocal by Newton-Raphson in fixed point; each
# output RDBPOT(SRDHM(reciprocal, E[d]), bits over unit + 23) - 128.

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def _wrap32(v):
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _srdhm32(a, b):
    if a == b == I32_MIN:
        return I32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return _wrap32(_trunc_div(ab + nudge, 1 << 31))


def _mul_pot(x, exponent):
    """SaturatingRoundingMultiplyByPOT."""
    if exponent <= 0:
        return _rdbpot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return I32_MAX
    if x < -threshold:
        return I32_MIN
    return _wrap32(x << exponent)


def _exp_quarter(a):
    """exp(a) for a in [-1/4, 0), Q0.31 in and out."""
    constant_term, one_third = 1895147668, 715827883
    x = _wrap32(a + (1 << 28))
    x2 = _srdhm32(x, x)
    x3 = _srdhm32(x2, x)
    x4 = _srdhm32(x2, x2)
    x4_over_4 = _mul_pot(x4, -2)
    poly = _mul_pot(_wrap32(_srdhm32(_wrap32(x4_over_4 + x3), one_third) + x2), -1)
    return _wrap32(constant_term + _srdhm32(constant_term, _wrap32(x + poly)))


_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
           (3, 720401), (4, 242))


def _exp_on_negative_values(a, integer_bits=5):
    """gemmlowp::exp_on_negative_values for a Q5.26 input, Q0.31 output."""
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = _wrap32((a & (quarter - 1)) - quarter)
    result = _exp_quarter(_mul_pot(a_mod, integer_bits))
    remainder = _wrap32(a_mod - a)
    for exponent, multiplier in _BARREL:
        if integer_bits > exponent and remainder & (1 << (frac + exponent)):
            result = _srdhm32(result, multiplier)
    return I32_MAX if a == 0 else result


def _one_over_one_plus_x(a):
    """gemmlowp::one_over_one_plus_x_for_x_in_0_1, Q0.31."""
    s = a + I32_MAX   # RoundingHalfSum(a, One): (s + sign(s)) / 2 toward zero
    half_denominator = _wrap32((s + 1) // 2 if s >= 0 else -((1 - s) // 2))
    x = _wrap32(1515870810 + _srdhm32(half_denominator, -1010580540))
    for _ in range(3):
        one_minus = _wrap32((1 << 29) - _srdhm32(half_denominator, x))
        x = _wrap32(x + _mul_pot(_srdhm32(x, one_minus), 2))
    return _mul_pot(x, 1)


def softmax_params(beta, s_in):
    """PreprocessSoftmaxScaling and the input radius (diff_min)."""
    real = min(float(beta) * float(s_in) * float(1 << 26), (1 << 31) - 1.0)
    mul, shift = quantize_multiplier(real)
    left = 31 - shift
    if left < 0:
        raise ValueError("softmax input multiplier below 1")
    radius = int(np.floor(31.0 * (1 << 26) / (1 << left)))
    return mul, left, -radius


def softmax_exp_table(beta, s_in):
    """E[d] for d = max - x in 0..255 (0 where the interpreter skips it)."""
    mul, left, diff_min = softmax_params(beta, s_in)
    table = []
    for d in range(256):
        if -d < diff_min:
            table.append(0)
            continue
        scaled = _srdhm32(_wrap32(-d * (1 << left)), mul)
        table.append(_exp_on_negative_values(scaled))
    return table


def softmax_int8(x, table):
    """The reference int8 softmax over the last axis of an int array, output
    scale 1/256 and zero point -128 (TFLite requires them)."""
    x = np.asarray(x, dtype=np.int64)
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    for r, row in enumerate(rows):
        e = [table[int(row.max() - v)] for v in row]
        total = 0
        for v in e:
            total = _wrap32(total + _rdbpot(v, 12))
        headroom = 32 - int(total & 0xFFFFFFFF).bit_length()
        bits_over_unit = 12 - headroom
        shifted = _wrap32(((total & 0xFFFFFFFF) << headroom) - (1 << 31))
        scale = _one_over_one_plus_x(shifted)
        exponent = bits_over_unit + 31 - 8
        for c, v in enumerate(e):
            out[r, c] = min(127, max(-128, _rdbpot(_srdhm32(scale, v), exponent) - 128))
    return out.reshape(x.shape)
