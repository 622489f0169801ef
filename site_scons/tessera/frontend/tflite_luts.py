"""TFLite's int8 LOGISTIC and HARD_SWISH as 256-entry tables, and its
reference int8 SOFTMAX.

Both are int8 -> int8 functions of one value, so the IR's `lut` op (issue
10) computes them exactly from a table filled here at build time, for every
input, with TFLite's own recipe:

- LOGISTIC, TANH: the interpreter fills a table in float32
  (PopulateLookupTable): x = s_in * (q - zp_in), y = 1 / (1 + exp(-x)) or
  tanh(x), q_out = round(y * (1 / s_out)) + zp_out (half away from zero),
  clamped.
- HARD_SWISH: the integer recipe of reference_ops::HardSwish, in 16-bit
  fixed point (HardSwishPrepare's multipliers, a saturating rounding
  doubling high multiply for the input and the "relu-ish" factor, a
  truncating one for their product, a rounding shift).

- SOFTMAX: the table of exponentials of reference_ops::Softmax (Q0.31, of
  d = max - x); the rest of the recipe (the row's sum and its fixed-point
  reciprocal) is the IR softmax's rounding "tflite" (golden/gemmlowp.py).

tests/test_tflite.py compares all three with the TFLite interpreter.
"""

import numpy as np

from ..golden.gemmlowp import exp_on_negative_values, srdhm32, wrap32
from .tflite_math import quantize_multiplier

I16_MIN, I16_MAX = -(1 << 15), (1 << 15) - 1


def _round_away(x):
    return np.where(x >= 0, np.floor(x + np.float32(0.5)), -np.floor(-x + np.float32(0.5)))


def _float_table(f, s_in, zp_in, s_out, zp_out):
    q = np.arange(-128, 128, dtype=np.int32)
    x = np.float32(s_in) * (q - np.int32(zp_in)).astype(np.float32)
    y = f(x).astype(np.float32)
    r = _round_away((y * (np.float32(1) / np.float32(s_out))).astype(np.float32))
    return [int(v) for v in np.clip(r.astype(np.int64) + zp_out, -128, 127)]


def logistic_table(s_in, zp_in, s_out, zp_out):
    return _float_table(lambda x: np.float32(1) / (np.float32(1) + np.exp(-x, dtype=np.float32)),
                        s_in, zp_in, s_out, zp_out)


def tanh_table(s_in, zp_in, s_out, zp_out):
    return _float_table(lambda x: np.tanh(x, dtype=np.float32), s_in, zp_in, s_out, zp_out)


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


# ---- SOFTMAX: the exponential table of reference_ops::Softmax ---------------

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
        scaled = srdhm32(wrap32(-d * (1 << left)), mul)
        table.append(exp_on_negative_values(scaled))
    return table
