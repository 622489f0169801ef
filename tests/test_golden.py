"""The golden model's arithmetic against plain-Python loops written from the
IR's definition (docs in tessera.ir), on small random layers."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tessera.golden import ops
from tessera.ir import Requant


def naive_requant(acc, mul, add, shift, rounding, zp, lo, hi):
    total = acc * mul + add
    if rounding == "half_up" and shift > 0:
        total += 1 << (shift - 1)
    return min(hi, max(lo, (total >> shift) + zp))   # Python >> floors


def naive_conv(x, w, bias, off, kernel, stride, pad, depthwise=False):
    h, wd, c = x.shape
    kh, kw = kernel
    sh, sw = stride
    top, left, bottom, right = pad
    ho = (h + top + bottom - kh) // sh + 1
    wo = (wd + left + right - kw) // sw + 1
    co = c if depthwise else w.shape[0]
    out = np.zeros((ho, wo, co), dtype=np.int64)
    for oy in range(ho):
        for ox in range(wo):
            for o in range(co):
                acc = int(bias[o]) if bias is not None else 0
                for i in range(kh):
                    for j in range(kw):
                        y, xx = oy * sh - top + i, ox * sw - left + j
                        if not (0 <= y < h and 0 <= xx < wd):
                            continue   # padding contributes 0
                        if depthwise:
                            acc += (int(x[y, xx, o]) + off) * int(w[i, j, o])
                        else:
                            for ci in range(c):
                                acc += (int(x[y, xx, ci]) + off) * int(w[o, i, j, ci])
                out[oy, ox, o] = acc
    return out


def test_requantize_examples_by_hand():
    # 100 * 3 = 300, >> 2 = 75 (floor) ; half_up adds 2 first: 302 >> 2 = 75
    rq = Requant(mul=[3], add=[0], shift=[2], rounding="floor", zero_point=0)
    assert ops.requantize(np.array([[100]]), rq)[0, 0] == 75
    # 101 * 3 = 303: floor 303/4 = 75.75 -> 75; half up -> 76
    assert ops.requantize(np.array([[101]]), rq)[0, 0] == 75
    rq.rounding = "half_up"
    assert ops.requantize(np.array([[101]]), rq)[0, 0] == 76
    # ties go up, also for negatives: -6/4 = -1.5 -> -1 (half up), floor -> -2
    rq2 = Requant(mul=[1], add=[0], shift=[2], rounding="half_up", zero_point=0)
    assert ops.requantize(np.array([[-6]]), rq2)[0, 0] == -1
    rq2.rounding = "floor"
    assert ops.requantize(np.array([[-6]]), rq2)[0, 0] == -2
    # zero point added after the shift, clamp after the zero point
    rq3 = Requant(mul=[1], add=[0], shift=[0], rounding="half_up", zero_point=-128, lo=-128, hi=127)
    assert ops.requantize(np.array([[300]]), rq3)[0, 0] == 127
    assert ops.requantize(np.array([[5]]), rq3)[0, 0] == -123


@settings(max_examples=200, deadline=None)
@given(acc=st.integers(-(1 << 24), 1 << 24), mul=st.integers(0, (1 << 31) - 1),
       add=st.integers(-(1 << 20), 1 << 20), shift=st.integers(0, 40),
       rounding=st.sampled_from(["half_up", "floor"]), zp=st.integers(-128, 127))
def test_requantize_matches_python_integers(acc, mul, add, shift, rounding, zp):
    rq = Requant(mul=[mul], add=[add], shift=[shift], rounding=rounding, zero_point=zp)
    got = ops.requantize(np.array([[acc]]), rq)[0, 0]
    assert got == naive_requant(acc, mul, add, shift, rounding, zp, -128, 127)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_conv_and_depthwise_match_loops(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    kh, kw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    h, w = data.draw(st.integers(kh, 6)), data.draw(st.integers(kw, 6))
    c, co = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    stride = [data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))]
    pad = [data.draw(st.integers(0, kh - 1)), data.draw(st.integers(0, kw - 1)),
           data.draw(st.integers(0, kh - 1)), data.draw(st.integers(0, kw - 1))]
    off = data.draw(st.integers(-127, 128))
    x = rng.integers(-128, 128, size=(h, w, c))
    wt = rng.integers(-127, 128, size=(co, kh, kw, c))
    bias = rng.integers(-1000, 1000, size=co)
    assert np.array_equal(ops.conv2d(x, wt, bias, off, [kh, kw], stride, pad),
                          naive_conv(x, wt, bias, off, [kh, kw], stride, pad))
    wd = rng.integers(-127, 128, size=(kh, kw, c))
    bd = rng.integers(-1000, 1000, size=c)
    assert np.array_equal(ops.depthwise(x, wd, bd, off, [kh, kw], stride, pad),
                          naive_conv(x, wd, bd, off, [kh, kw], stride, pad, depthwise=True))


def test_linear_flattens_hwc():
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, size=(2, 3, 4))
    w = rng.integers(-127, 128, size=(5, 24))
    got = ops.linear(x, w, None, 3)
    flat = [int(v) + 3 for v in x.reshape(-1)]     # HWC order: c fastest
    want = [sum(a * int(b) for a, b in zip(flat, row)) for row in w]
    assert got.reshape(-1).tolist() == want


def test_pools_and_add():
    x = np.arange(16).reshape(4, 4, 1) - 8
    assert ops.maxpool(x, [2, 2], [2, 2], [0, 0, 0, 0]).reshape(-1).tolist() == [-3, -1, 5, 7]
    # padding never wins a max, even against negative values
    assert ops.maxpool(x - 100, [2, 2], [2, 2], [1, 1, 1, 1])[0, 0, 0] == -108
    assert ops.avgpool_sum(x, 1, [2, 2], [2, 2]).reshape(-1).tolist() == [
        (-8 - 7 - 4 - 3) + 4, (-6 - 5 - 2 - 1) + 4, (0 + 1 + 4 + 5) + 4, (2 + 3 + 6 + 7) + 4]
    a, b = np.array([[[10]]]), np.array([[[-3]]])
    assert ops.add(a, b, [3, 5], [1, 2])[0, 0, 0] == (10 + 1) * 3 + (-3 + 2) * 5


def test_int64_overflow_is_an_error_not_a_wrong_value():
    rq = Requant(mul=[1 << 31], add=[0], shift=[0], rounding="floor")
    with pytest.raises(OverflowError):
        ops.requantize(np.array([[1 << 40]]), rq)
