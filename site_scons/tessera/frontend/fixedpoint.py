"""Real scale factors to integer multiplier and shift.

M ~= mul / 2**shift with mul in [2**30, 2**31): the TFLite / CMSIS-NN
representation (CMSIS-NN's `shift` argument is 31 - shift here), so a layer
lowered from standard QDQ can be handed to CMSIS-NN unchanged.
"""

import math

MAX_SHIFT = 62


def quantize_multiplier(m):
    """(mul, shift) with m ~= mul / 2**shift, mul < 2**31, 0 <= shift <= 62."""
    if m < 0:
        raise ValueError(f"negative scale {m}")
    if m == 0:
        return 0, 0
    frac, exp = math.frexp(m)          # m = frac * 2**exp, frac in [0.5, 1)
    mul = round(frac * (1 << 31))
    shift = 31 - exp
    if mul == 1 << 31:
        mul //= 2
        shift -= 1
    if shift > MAX_SHIFT:
        # tiny scales: keep the largest shift and let mul shrink
        mul = round(m * (1 << MAX_SHIFT))
        shift = MAX_SHIFT
    if shift < 0:
        raise ValueError(f"scale {m} too large for a 32-bit multiplier")
    return int(mul), int(shift)


def common_shift_multipliers(ratios, bits=30):
    """Integer multipliers sharing one shift: ratios[i] ~= muls[i] / 2**shift,
    the largest multiplier below 2**bits (for elementwise adds)."""
    top = max(ratios)
    if top <= 0:
        return [0 for _ in ratios], 0
    shift = bits - 1 - math.floor(math.log2(top))
    shift = max(0, min(MAX_SHIFT, shift))
    return [int(round(r * (1 << shift))) for r in ratios], shift
