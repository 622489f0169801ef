"""Build-time tables of the table-driven IR ops (lut, softmax, resize).

Each table is computed from the quantization parameters the way the source
framework evaluates the float op between DequantizeLinear and
QuantizeLinear (ONNX Runtime: float32 dequantization, the float function,
quantization rounding half to even), so the integer layer reproduces it.
Any dialect may use them (the TFLite importer's LOGISTIC, HARD_SWISH,
SOFTMAX) or build its own table with its own rounding rule.
"""

import math

import numpy as np

from ..ir import RESIZE_FRAC

STORED = np.arange(-128, 128, dtype=np.int64)   # every int8 stored value, in table order


def _real(shift, scale, zero_point):
    """float32 real value of every stored int8 value (ONNX Runtime's DQ)."""
    q = (STORED + shift - zero_point).astype(np.float32)
    return q * np.float32(scale)


def _quantize(real, shift, scale, zero_point, lo, hi):
    """ONNX Runtime's QuantizeLinear (float32 division, round half to even,
    saturate), back in the stored domain."""
    q = np.rint(np.asarray(real, dtype=np.float32) / np.float32(scale)).astype(np.float64) + zero_point
    return np.clip(q - shift, lo, hi).astype(np.int64)


# The float functions, in float64 on ORT's float32 inputs (ORT's float32
# results differ by ULPs, far below one output step).
FUNCTIONS = {
    "Sigmoid": lambda v, a: 1.0 / (1.0 + np.exp(-v)),
    "Tanh": lambda v, a: np.tanh(v),
    "HardSigmoid": lambda v, a: np.clip(a.get("alpha", 0.2) * v + a.get("beta", 0.5), 0.0, 1.0),
    "HardSwish": lambda v, a: v * np.clip(v / 6.0 + 0.5, 0.0, 1.0),
    "LeakyRelu": lambda v, a: np.where(v >= 0, v, a.get("alpha", 0.01) * v),
    "Elu": lambda v, a: np.where(v >= 0, v, a.get("alpha", 1.0) * np.expm1(np.minimum(v, 0.0))),
    "Relu": lambda v, a: np.maximum(v, 0.0),
    "Clip": lambda v, a: np.clip(v, a.get("min", -np.inf), a.get("max", np.inf)),
    "Identity": lambda v, a: v,
}


def lut_table(fn, attrs, x, y, lo=-128, hi=127):
    """256 stored outputs of fn for every stored input. x, y: (shift,
    scale, zero point) of the input and output tensors."""
    v = _real(*x).astype(np.float64)
    return _quantize(FUNCTIONS[fn](v, attrs), *y, lo, hi)


def extremum_tables(steps, x, y, lo=-128, hi=127, channels=1):
    """Max and Min of every stored input and constants, in turn (steps:
    [(op, constants)]): one table, or a table per channel where a constant
    has one value per channel."""
    v = _real(*x).astype(np.float64)
    per_channel = any(np.asarray(c).size > 1 for _, c in steps)
    rows = []
    for ch in range(channels if per_channel else 1):
        r = v
        for op, c in steps:
            c = np.asarray(c, dtype=np.float32).reshape(-1)
            r = (np.maximum if op == "Max" else np.minimum)(r, float(c[ch] if c.size > 1 else c[0]))
        rows.append(_quantize(r, *y, lo, hi))
    return np.stack(rows) if per_channel else rows[0]


def prelu_tables(slopes, x, y, lo=-128, hi=127):
    """One 256-entry table per channel: v >= 0 ? v : slope[c] * v."""
    v = _real(*x).astype(np.float64)
    return np.stack([_quantize(np.where(v >= 0, v, float(s) * v), *y, lo, hi) for s in slopes])


# ---- softmax ------------------------------------------------------------------

EXP_BITS = 24   # E[0] = 2**EXP_BITS


def softmax_params(x_scale, y_scale, beta=1.0, channels=1):
    """(table, mul, shift) of the IR softmax: E[d] = round(2**24 exp(-beta
    s_x d)) for d = 0..255, and mul / 2**shift ~= 1 / s_y with mul < 2**31;
    the sum of `channels` values shifted by `shift` stays below 2**62."""
    d = np.arange(256, dtype=np.float64)
    table = np.rint(np.exp(-beta * x_scale * d) * (1 << EXP_BITS)).astype(np.int64)
    shift = 30 - math.ceil(math.log2(1.0 / y_scale))
    shift = max(1, min(shift, 30, 62 - EXP_BITS - max(1, channels - 1).bit_length()))
    mul = int(round((1 << shift) / y_scale))
    if mul >= 1 << 31:
        raise ValueError(f"softmax output scale {y_scale} is too small")
    return [int(e) for e in table], mul, shift


# ---- resize ---------------------------------------------------------------------

def _source_coord(o, out_size, in_size, scale, mode):
    """ONNX Resize's coordinate_transformation_mode: output index -> input coordinate."""
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if out_size > 1 else 0.0
    if mode == "align_corners":
        return 0.0 if out_size == 1 else o * (in_size - 1) / (out_size - 1)
    if mode == "asymmetric":
        return o / scale
    if mode == "tf_half_pixel_for_nearest":
        return (o + 0.5) / scale
    raise ValueError(f"coordinate_transformation_mode {mode!r}")


def _nearest(c, rule):
    if rule == "floor":
        return math.floor(c)
    if rule == "ceil":
        return math.ceil(c)
    if rule == "round_prefer_ceil":
        return math.floor(c + 0.5)
    # round_prefer_floor (ONNX's default): halves go down
    return math.ceil(c - 0.5)


def resize_axis(out_size, in_size, scale, mode, coord, nearest_rule):
    """[(i0, i1, f), ...] per output index: the two input indices and the
    weight of i1 in RESIZE_FRAC fraction bits."""
    one = 1 << RESIZE_FRAC
    rows = []
    for o in range(out_size):
        c = float(np.float32(_source_coord(o, out_size, in_size, scale, coord)))
        if mode == "nearest":
            i = min(max(_nearest(c, nearest_rule), 0), in_size - 1)
            rows.append((i, i, 0))
            continue
        c = min(max(c, 0.0), in_size - 1.0)
        i0 = int(math.floor(c))
        i1 = min(i0 + 1, in_size - 1)
        f = int(round((c - i0) * one))
        if f == one:
            i0, f = i1, 0
        rows.append((i0, i1 if f else i0, f))
    return rows


def resize_table(in_hw, out_hw, scales_hw, mode, coord, nearest_rule):
    """The IR resize table: Ho (y0, y1, fy) triples then Wo (x0, x1, fx)."""
    table = []
    for axis in (0, 1):
        for t in resize_axis(out_hw[axis], in_hw[axis], scales_hw[axis], mode, coord, nearest_rule):
            table.extend(int(v) for v in t)
    return table


# ---- Deeploy's integer softmaxes --------------------------------------------------

def check_deeploy_softmax(mode, params, length):
    """None when Deeploy's C kernel for `mode` (ir.Layer softmax) stays in
    its 32-bit arithmetic for every input row of `length` values (so the
    golden model's exact integers are the kernel's), else what leaves it."""
    u32 = 1 << 32
    if mode == "isoftmax":
        a, b, c, log2, levels = (int(v) for v in params)
        if log2 < 2:
            return f"iSoftmax log2={log2} (its int8 exponent would wrap)"
        p = np.arange(-(log2 - 1), 1, dtype=np.int64)
        sq = (p + b) ** 2
        if np.abs(sq).max() >= 1 << 31 or np.abs(a * sq).max() >= 1 << 31:
            return f"iSoftmax coeffA={a}, coeffB={b}: the polynomial leaves int32"
        e = a * sq + c
        if e.min() < 0 or a * b * b + c < 1:
            return f"iSoftmax coeffC={c}: the exponential is not positive"
        if e.max() * max(length, levels - 1) >= u32:
            return f"iSoftmax over {length} values: the sum or the scaled exponential leaves 32 bits"
        return None
    if mode == "itamax":
        return None if 256 * length < u32 else f"ITAMax over {length} values: the sum leaves 32 bits"
    if mode == "itapartialmax":
        group = int(params[0])
        if group > length:
            return f"ITAPartialMax group_width={group} beyond the row's {length} values"
        return None if 256 * length < u32 else f"ITAPartialMax over {length} values: the sum leaves 32 bits"
    return f"softmax mode {mode!r}"


# ---- layer normalization -----------------------------------------------------------

def layernorm_params(gamma, beta, eps, x_scale, y_scale, y_zero_point, channels):
    """(eps term, mul, add, shift per channel) of the IR's layernorm "int":
    the eps term 2**16 * N**2 * eps / s_x**2 (at least 1), and the requantization of
    its Q16 normalized values to gamma * v + beta at the output's scale,
    each channel with a shift of its own: the largest keeping its
    multiplier and its add within int32 (the kernels' Requant arrays).
    The rounding of the multiplier costs at most |v| * 2**(15 - shift) of
    an output step (v the normalized value, |v| < sqrt(N)), the Q16 value's
    own rounding gamma / s_y * 2**-17: with |beta / s_y| <= 256 (shift >= 22)
    a tenth of a step for N = 256."""
    n = int(channels)
    e = max(1, int(round(65536.0 * n * n * float(eps) / (float(x_scale) ** 2))))
    if e >= 1 << 56:
        raise ValueError(f"LayerNormalization epsilon {eps} is too large for the input scale {x_scale}")
    g = np.broadcast_to(np.asarray(gamma, dtype=np.float64).reshape(-1), (n,)) / float(y_scale)
    b = np.broadcast_to(np.asarray(beta, dtype=np.float64).reshape(-1), (n,)) / float(y_scale)
    muls, adds, shifts = [], [], []
    for gc, bc in zip(g, b):
        s = 60
        if gc != 0:
            s = min(s, 16 + 30 - math.ceil(math.log2(abs(gc))))
        if bc != 0:
            s = min(s, 30 - math.ceil(math.log2(abs(bc))))
        if s < 0:
            raise ValueError(f"LayerNormalization output scale {y_scale} is too small for its gamma and beta")
        muls.append(int(round(gc * 2.0 ** (s - 16))))
        adds.append(int(round(bc * 2.0 ** s)))
        shifts.append(s)
    return e, muls, adds, shifts
