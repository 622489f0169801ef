"""The IR's arithmetic in NumPy integers: the oracle every kernel must match.

Biases broadcast against the accumulator, so a bias shaped like the output
([H, W, C], a Gemm's full C matrix) adds per element; a Requant with a
`shape` broadcasts its parameters the same way (see ir.Requant).

Each function takes and returns stored-domain arrays (HWC; int8 values held
in int64 arrays for headroom). Products of 8-bit values summed over at most a
few hundred thousand terms stay far below 2**53, so the convolutions run as
float64 BLAS matmuls and are still exact integers.
"""

import numpy as np

from ..ir import Requant
from .gemmlowp import softmax_rows


def requantize(acc, rq: Requant):
    """Apply a Requant to int64 accumulators whose last axis is the channel."""
    acc = acc.astype(np.int64)
    if getattr(rq, "neg_mul", None):
        # a LeakyRelu folded in: a negative accumulator takes its own multiplier and shift
        from dataclasses import replace
        pos = requantize(acc, replace(rq, neg_mul=None, neg_shift=None))
        neg = requantize(acc, replace(rq, mul=list(rq.neg_mul), shift=list(rq.neg_shift), neg_mul=None,
                                      neg_shift=None))
        return np.where(acc < 0, neg, pos)
    if getattr(rq, "shape", None):
        # parameters laid out as rq.shape ([h, w, c]) broadcast over [H, W, C]
        mul, add, shift = (_shaped(v, rq.shape, acc.shape) for v in (rq.mul, rq.add, rq.shift))
    else:
        channels = acc.shape[-1]
        mul = _per_channel(rq.mul, channels)
        add = _per_channel(rq.add, channels) << (getattr(rq, "add_shift", None) or 0)
        shift = _per_channel(rq.shift, channels)
    if rq.rounding == "tflite":
        return np.clip(tflite_multiply(acc, mul, shift) + rq.zero_point, rq.lo, rq.hi)
    if rq.rounding == "tflite_div":
        return np.clip(_div_half_away(acc, mul) + rq.zero_point, rq.lo, rq.hi)
    if rq.rounding == "half_up":
        rnd = np.where(shift > 0, np.left_shift(np.int64(1), np.maximum(shift - 1, 0)), 0)
    else:
        rnd = np.zeros_like(shift)
    # int64 is what the kernels use; NumPy integers wrap silently, so check
    # the bound first and make an overflow an error, not a different value.
    _check_int64(float(np.abs(acc).max(initial=0)) * float(np.abs(mul).max())
                 + float(np.abs(add).max()) + float(rnd.max()), "requantization")
    scaled = acc * mul + add + rnd
    y = np.right_shift(scaled, shift)
    if getattr(rq, "divisor", None):
        y = np.floor_divide(y, rq.divisor)   # an exact constant division (NEMO's 2**d - 1)
    y = y + rq.zero_point
    return np.clip(y, rq.lo, rq.hi)


# ---- TFLite's fixed-point arithmetic (gemmlowp's, as TFLite's kernels use it)

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


def _check_int32(x, what):
    if x.size and (x.min() < _I32_MIN or x.max() > _I32_MAX):
        raise OverflowError(f"{what} leaves int32 (TFLite computes it in 32 bits)")


def _srdhm(a, b):
    """SaturatingRoundingDoublingHighMul: (a * b + nudge) / 2^31, the nudge
    2^30 (1 - 2^30 below zero) and a division toward zero: halves round up."""
    ab = a * b
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    num = ab + nudge
    q = np.where(num >= 0, num >> 31, -((-num) >> 31))
    return np.where((a == b) & (a == _I32_MIN), _I32_MAX, q)


def _rdbpot(x, exponent):
    """RoundingDivideByPOT: x / 2^exponent rounded half away from zero."""
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def tflite_multiply(x, mul, shift):
    """TFLite's MultiplyByQuantizedMultiplier with the IR's shift (the
    exponent is 31 - shift): int32 x, int64 arrays broadcast."""
    x = np.asarray(x, dtype=np.int64)
    mul = np.asarray(mul, dtype=np.int64)
    exponent = 31 - np.asarray(shift, dtype=np.int64)
    _check_int32(x, "TFLite requantization input")
    left = np.maximum(exponent, 0)
    right = np.maximum(-exponent, 0)
    shifted = x << left
    _check_int32(shifted, "TFLite requantization's left shift")
    return _rdbpot(_srdhm(shifted, mul), right)


def _div_half_away(acc, divisor):
    """TFLite's average pooling: (acc +- n/2) / n, C division (toward zero)."""
    half = divisor // 2
    mag = (np.abs(acc) + half) // divisor
    return np.where(acc >= 0, mag, -mag)


def _check_int64(bound, what):
    if bound >= 2.0 ** 63:
        raise OverflowError(f"{what} overflows 64 bits (bound {bound:.3g})")


def _per_channel(values, channels):
    arr = np.asarray(values, dtype=np.int64)
    if arr.size == 1:
        return np.full(channels, arr.reshape(()), dtype=np.int64)
    assert arr.size == channels, (arr.size, channels)
    return arr


def _shaped(values, shape, out_shape):
    arr = np.asarray(values, dtype=np.int64)
    if arr.size == 1:
        return np.full(out_shape, arr.reshape(()), dtype=np.int64)
    return np.broadcast_to(arr.reshape(shape), out_shape)


def _pad(x, pad, value):
    top, left, bottom, right = pad
    return np.pad(x, ((top, bottom), (left, right), (0, 0)), constant_values=value)


def _windows(x, kernel, stride, dilation=None):
    """[Ho, Wo, kh, kw, C] view of the sliding windows of x [H, W, C]
    (dilated: taps dilation apart within a window of d * (k - 1) + 1)."""
    kh, kw = kernel
    sh, sw = stride
    dh, dw = dilation or (1, 1)
    win = np.lib.stride_tricks.sliding_window_view(x, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(0, 1))
    # sliding_window_view puts the window axes last: [Ho', Wo', C, kh, kw]
    win = win[::sh, ::sw, :, ::dh, ::dw]
    return win.transpose(0, 1, 3, 4, 2)


def conv2d(x, w, bias, input_offset, kernel, stride, pad, dilation=None):
    """x [H, W, Ci], w [Co, kh, kw, Ci] -> int64 acc [Ho, Wo, Co]."""
    xo = _pad(x.astype(np.int64) + input_offset, pad, 0)
    win = _windows(xo, kernel, stride, dilation)
    ho, wo = win.shape[:2]
    cols = win.reshape(ho * wo, -1).astype(np.float64)
    acc = cols @ w.reshape(w.shape[0], -1).astype(np.float64).T
    acc = np.rint(acc).astype(np.int64).reshape(ho, wo, -1)
    return acc + (0 if bias is None else bias.astype(np.int64))


def depthwise(x, w, bias, input_offset, kernel, stride, pad, dilation=None):
    """x [H, W, C], w [kh, kw, C] -> int64 acc [Ho, Wo, C]."""
    xo = _pad(x.astype(np.int64) + input_offset, pad, 0)
    win = _windows(xo, kernel, stride, dilation)
    acc = np.einsum("hwijc,ijc->hwc", win, w.astype(np.int64))
    return acc + (0 if bias is None else bias.astype(np.int64))


def linear(x, w, bias, input_offset):
    """x [H, W, C] flattened in HWC order, w [Co, K] -> int64 acc [1, 1, Co]."""
    v = (x.astype(np.int64) + input_offset).reshape(-1).astype(np.float64)
    acc = np.rint(w.astype(np.float64) @ v).astype(np.int64)
    acc = acc + (0 if bias is None else bias.astype(np.int64))
    return acc.reshape(1, 1, -1)


def pointwise(x, w, bias, input_offset):
    """x [H, W, Ci], w [Co, Ci] -> int64 acc [H, W, Co]."""
    h, wd, ci = x.shape
    v = (x.astype(np.int64) + input_offset).reshape(h * wd, ci).astype(np.float64)
    acc = np.rint(v @ w.astype(np.float64).T).astype(np.int64).reshape(h, wd, -1)
    return acc + (0 if bias is None else bias.astype(np.int64))


def avgpool_sum(x, input_offset, kernel, stride):
    """Window sums of (x + input_offset), no padding -> int64 [Ho, Wo, C]."""
    win = _windows(x.astype(np.int64) + input_offset, kernel, stride)
    return win.sum(axis=(2, 3))


def maxpool(x, kernel, stride, pad):
    """Window maxima; padded positions never win."""
    floor = np.iinfo(np.int64).min
    xp = _pad(x.astype(np.int64), pad, floor)
    win = _windows(xp, kernel, stride)
    return win.max(axis=(2, 3))


def add(a, b, in_mul, in_offset, in_shift=None):
    """(a + oa) * ma + (b + ob) * mb in int64 (broadcasting size-1 axes);
    with in_shift TFLite's ADD: each (x + o) << 20 rescaled by
    tflite_multiply, then summed in int32."""
    if in_shift:
        sa = tflite_multiply((a.astype(np.int64) + in_offset[0]) << 20, in_mul[0], in_shift[0])
        sb = tflite_multiply((b.astype(np.int64) + in_offset[1]) << 20, in_mul[1], in_shift[1])
        total = sa + sb
        _check_int32(total, "TFLite add")
        return total
    a = a.astype(np.int64) + in_offset[0]
    b = b.astype(np.int64) + in_offset[1]
    _check_int64(float(np.abs(a).max(initial=0)) * abs(in_mul[0])
                 + float(np.abs(b).max(initial=0)) * abs(in_mul[1]), "add")
    return a * in_mul[0] + b * in_mul[1]


def matmul(a, b, in_offset, trans_b=False):
    """a [Bt, M, K] times b [Bb, K, N] (Bb 1: the same matrix for every
    batch; trans_b: b stored [Bb, N, K]) -> int64 [Bt, M, N], each operand
    plus its offset."""
    a = a.astype(np.int64) + in_offset[0]
    b = b.astype(np.int64) + in_offset[1]
    if trans_b:
        b = b.transpose(0, 2, 1)
    if b.shape[0] == 1:
        b = np.broadcast_to(b, (a.shape[0],) + b.shape[1:])
    _check_int64(float(np.abs(a).max(initial=0)) * float(np.abs(b).max(initial=0)) * a.shape[2], "matmul")
    # int64 products summed exactly (NumPy's integer matmul does not use BLAS)
    return np.matmul(a, b)


def mul(a, b, in_offset):
    """(a + oa) * (b + ob) in int64, broadcasting size-1 axes."""
    return (a.astype(np.int64) + in_offset[0]) * (b.astype(np.int64) + in_offset[1])


def concat(xs, in_mul, in_offset, axis):
    """Inputs rescaled ((x_i + o_i) * m_i) and joined along an HWC axis."""
    return np.concatenate([(x.astype(np.int64) + o) * m for x, m, o in zip(xs, in_mul, in_offset)], axis=axis)


def resize_tables(table, out_h, out_w):
    """(rows [Ho, 3], cols [Wo, 3]) of a resize layer's table."""
    t = np.asarray(table, dtype=np.int64)
    return t[:3 * out_h].reshape(out_h, 3), t[3 * out_h:].reshape(out_w, 3)


def resize(x, input_offset, table, out_h, out_w, frac):
    """Separable two-tap interpolation with integer weights (see ir.Layer)."""
    rows, cols = resize_tables(table, out_h, out_w)
    one = 1 << frac
    xo = x.astype(np.int64) + input_offset
    acc = 0
    for r, wr in ((rows[:, 0], one - rows[:, 2]), (rows[:, 1], rows[:, 2])):
        for q, wq in ((cols[:, 0], one - cols[:, 2]), (cols[:, 1], cols[:, 2])):
            acc = acc + xo[r][:, q] * (wr[:, None, None] * wq[None, :, None])
    return acc


def lut(x, table):
    """table[t][x + 128], one row per channel or one for all."""
    t = np.asarray(table, dtype=np.int64).reshape(-1, 256)
    idx = x.astype(np.int64) + 128
    if t.shape[0] == 1:
        return t[0][idx]
    return t[np.arange(x.shape[-1])[None, None, :], idx]


def transpose(x, perm, dims=None, out_shape=None):
    """The axes of x [H, W, C] permuted: output axis k is input axis perm[k];
    with dims, x viewed as dims first and the result shaped out_shape."""
    if dims is None:
        return np.transpose(x, perm)
    return np.ascontiguousarray(x.reshape(dims).transpose(perm)).reshape(out_shape)


def reshape(x, shape):
    """The same values in the same HWC order, another shape."""
    return np.reshape(x, shape)


def gather(x, table, axis, fill=None):
    """x's slices at the indices `table` along HWC `axis`; index -1 is `fill`."""
    index = np.asarray(table, dtype=np.int64)
    y = np.take(x, np.maximum(index, 0), axis=axis)
    if np.any(index < 0):
        shape = [1, 1, 1]
        shape[axis] = index.size
        y = np.where(index.reshape(shape) < 0, fill, y)
    return y


def argmax(x):
    """The first index of the largest value along the channels, [H, W, 1]."""
    return np.argmax(x, axis=2)[..., None].astype(np.int64)


def softmax(x, table, rq, mode=None):
    """Integer softmax over the channel axis (see ir.Layer): table lookups of
    max - x, their 64-bit sum, one rounded division per output; with
    rounding "tflite", TFLite's fixed-point recipe (golden.gemmlowp);
    Deeploy's forms by `mode` (on the stored int8 values, as its kernels
    read them; the uint8 output stored shifted by 128)."""
    if mode is not None:
        return deeploy_softmax(x.astype(np.int64), mode, table) - 128
    if rq.rounding == "tflite":
        return softmax_rows(x, table, rq.zero_point, rq.lo, rq.hi)
    e = np.asarray(table, dtype=np.int64)
    xi = x.astype(np.int64)
    d = xi.max(axis=-1, keepdims=True) - xi
    ex = e[d]
    s = ex.sum(axis=-1, keepdims=True)
    mul, shift = int(rq.mul[0]), int(rq.shift[0])
    _check_int64(float(ex.max(initial=0)) * mul + float(s.max(initial=0)) * 2.0 ** shift, "softmax")
    num = ex * mul + (np.left_shift(s, shift - 1) if shift > 0 else s // 2)
    y = num // np.left_shift(s, shift) + rq.zero_point
    return np.clip(y, rq.lo, rq.hi)


# ---- Deeploy's integer softmaxes (the C arithmetic of its Generic kernels,
# exact on every value the frontend lets through: see tables.check_isoftmax)

def deeploy_softmax(x, mode, params):
    """Deeploy's iSoftmax / ITAMax / ITAPartialMax over the last axis of
    int8 values x (int64): the unsigned outputs 0..levels - 1."""
    m = x.max(axis=-1, keepdims=True)
    if mode == "isoftmax":
        a, b, c, log2, levels = (int(v) for v in params)
        d = x - m                                   # <= 0
        z = np.minimum((-d) // log2, 31)            # C's truncating division of d / log2, negated
        p = d + z * log2
        e = (a * (p + b) ** 2 + c) >> z
        return e * (levels - 1) // e.sum(axis=-1, keepdims=True)
    if mode == "itamax":
        levels = int(params[0])
        k = (m - x + 16) >> 5
        s = (256 >> k).sum(axis=-1, keepdims=True)
        return ((levels - 1) * 256 // s) >> k
    if mode == "itapartialmax":
        group, levels = (int(v) for v in params)
        rows = x.reshape(-1, x.shape[-1])
        s = np.zeros(len(rows), np.int64)
        gmax = np.full(len(rows), -128, np.int64)
        for g in range(rows.shape[1] // group):
            blk = rows[:, g * group:(g + 1) * group]
            cmax = blk.max(axis=1)
            rescale = np.where(cmax > gmax, (cmax - gmax + 16) >> 5, 0)
            gmax = np.maximum(gmax, cmax)
            s = (s >> rescale) + (256 >> ((gmax[:, None] - blk + 16) >> 5)).sum(axis=1)
        inv = (levels // 2 - 1) * 256 // s
        y = inv[:, None] >> ((gmax[:, None] - rows + 16) >> 5)
        return y.reshape(x.shape)
    raise ValueError(f"softmax mode {mode!r}")


def isqrt(v):
    """floor(sqrt(v)) of non-negative int64 values, exactly."""
    v = np.asarray(v, dtype=np.int64)
    r = np.floor(np.sqrt(v.astype(np.float64))).astype(np.int64)
    # float64's square root can be one off for large values
    r = np.where(r * r > v, r - 1, r)
    r = np.where((r + 1) * (r + 1) <= v, r + 1, r)
    return r


def _bit_length(v):
    """Bits of positive int64 values (int.bit_length, elementwise)."""
    v = np.asarray(v, dtype=np.int64)
    n = np.zeros_like(v)
    for b in (32, 16, 8, 4, 2, 1):
        big = (v >> b) > 0
        n = np.where(big, n + b, n)
        v = np.where(big, v >> b, v)
    return n + (v > 0)


def _trunc_div(a, b):
    """C's integer division (toward zero)."""
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def layernorm(x, input_offset, table, rq, mode):
    """Layer normalization over the channels (see ir.Layer): mode "int"
    returns the normalized values in Q16 (requantized after), mode
    "ilayernorm" Deeploy's output itself."""
    xo = x.astype(np.int64) + input_offset
    n = xo.shape[-1]
    if mode == "int":
        s1 = xo.sum(axis=-1, keepdims=True)
        d = ((n * (xo * xo).sum(axis=-1, keepdims=True) - s1 * s1) << 16) + int(table[0])
        f = (62 - _bit_length(d)) // 2
        r = (1 << 62) // isqrt(d << (2 * f))
        sh = 38 - f     # 62 - 16 (Q16) - f - 8 (D's 2**16 is 2**8 in its root)
        num = n * xo - s1
        _check_int64(float(np.abs(num).max(initial=0)) * float(r.max(initial=0)), "layernorm")
        return (num * r + (1 << (sh - 1))) >> sh
    if mode == "ilayernorm":
        t = np.asarray(table, dtype=np.int64)
        weight, bias = t[:n], t[n:]
        mean = _trunc_div(xo.sum(axis=-1, keepdims=True), n)
        d = xo - mean
        std = isqrt(_trunc_div((d * d).sum(axis=-1, keepdims=True), n) + 1)
        y = (_trunc_div(d * weight, std) + bias) >> int(rq.shift[0])
        return np.clip(y, rq.lo, rq.hi)
    raise ValueError(f"layernorm mode {mode!r}")
