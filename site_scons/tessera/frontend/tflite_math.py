"""TFLite's multiplier arithmetic: the rounding and the (multiplier, shift)
of a real scale exactly as TFLite's Prepare steps compute them. The
importer (tflite.py) and the tables (tflite_luts.py) both use it."""

import math


def tfl_round(x):
    """TfLiteRound: std::round, half away from zero."""
    return math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)


def quantize_multiplier(real):
    """TFLite's QuantizeMultiplier(double) -> (multiplier, IR shift), the IR
    shift being 31 - TFLite's exponent."""
    if real == 0.0:
        return 0, 31
    frac, exponent = math.frexp(real)
    q = tfl_round(frac * (1 << 31))
    if q == 1 << 31:
        q //= 2
        exponent += 1
    if exponent < -31:
        return 0, 31
    if exponent > 30:
        exponent, q = 30, (1 << 31) - 1
    return int(q), 31 - exponent
