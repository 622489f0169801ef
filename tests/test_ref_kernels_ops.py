"""The reference kernels of the operators of real exports (issue 10):
dilated conv2d/depthwise, broadcast mul/add, lookup tables, concatenation,
resize and softmax, compiled by the host gcc and called through ctypes,
against the golden model bit for bit on cases drawn by hypothesis (every
core alone and all together, as in test_ref_kernels)."""

import ctypes
from ctypes import POINTER, c_int, c_int8, c_int32

import numpy as np
import pytest
from hypothesis import given, strategies as st

from test_ref_kernels import (NCORES, OFFSETS, SETTINGS, Case, RequantT, Rq, arrays, conv_builder, draw_bias,  # noqa: F401
                              draw_rq, finish, header_layout, int8s, lib, ptr, requants, run_case, share_rows,
                              share_pixels, share_flat)
from tessera.frontend.tables import lut_table, prelu_tables, resize_table, softmax_params
from tessera.golden import ops
from tessera.ir import RESIZE_FRAC, Requant


class BinaryArgs(ctypes.Structure):
    _fields_ = [("a", POINTER(c_int8)), ("b", POINTER(c_int8)), ("out", POINTER(c_int8)),
                ("out_h", c_int32), ("out_w", c_int32), ("out_c", c_int32),
                ("a_h", c_int32), ("a_w", c_int32), ("a_c", c_int32),
                ("b_h", c_int32), ("b_w", c_int32), ("b_c", c_int32),
                ("in_mul", c_int32 * 2), ("in_offset", c_int32 * 2), ("rq", POINTER(RequantT))]


class LutArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8)), ("out", POINTER(c_int8)), ("pixels", c_int32), ("c", c_int32),
                ("table", POINTER(c_int8)), ("per_channel", c_int32)]


class ConcatArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8) * 8), ("out", POINTER(c_int8)), ("n_in", c_int32), ("outer", c_int32),
                ("inner", c_int32 * 8), ("in_mul", c_int32 * 8), ("in_offset", c_int32 * 8),
                ("rq", POINTER(RequantT))]


class ResizeArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8)), ("out", POINTER(c_int8)), ("in_h", c_int32), ("in_w", c_int32),
                ("c", c_int32), ("out_h", c_int32), ("out_w", c_int32), ("rows", POINTER(c_int32)),
                ("cols", POINTER(c_int32)), ("input_offset", c_int32), ("frac", c_int32),
                ("rq", POINTER(RequantT))]


class SoftmaxArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8)), ("out", POINTER(c_int8)), ("pixels", c_int32), ("c", c_int32),
                ("table", POINTER(c_int32)), ("mul", c_int32), ("shift", c_int32), ("zero_point", c_int32),
                ("lo", c_int32), ("hi", c_int32), ("rounding", c_int32), ("mode", c_int32),
                ("params", c_int32 * 5)]


class TransposeArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8)), ("out", POINTER(c_int8)), ("in_h", c_int32), ("in_w", c_int32),
                ("in_c", c_int32), ("perm", c_int32 * 3)]


class GatherArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8)), ("out", POINTER(c_int8)), ("in_h", c_int32), ("in_w", c_int32),
                ("in_c", c_int32), ("axis", c_int32), ("n_index", c_int32), ("index", POINTER(c_int32))]


class TransposeArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8)), ("out", POINTER(c_int8)), ("in_h", c_int32), ("in_w", c_int32),
                ("in_c", c_int32), ("perm", c_int32 * 3)]


class GatherArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8)), ("out", POINTER(c_int8)), ("in_h", c_int32), ("in_w", c_int32),
                ("in_c", c_int32), ("axis", c_int32), ("n_index", c_int32), ("index", POINTER(c_int32)),
                ("fill", c_int32)]


STRUCTS = {"tsr_binary_args_t": BinaryArgs, "tsr_lut_args_t": LutArgs, "tsr_concat_args_t": ConcatArgs,
           "tsr_resize_args_t": ResizeArgs, "tsr_softmax_args_t": SoftmaxArgs,
           "tsr_transpose_args_t": TransposeArgs, "tsr_gather_args_t": GatherArgs}


def test_struct_layout_matches_header(tmp_path):
    """sizeof and offsetof of every field, from the real header."""
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("no host gcc")
    for s, cls in STRUCTS.items():
        fields = ["in" if f[0] == "in_" else f[0] for f in cls._fields_]
        want = [ctypes.sizeof(cls)] + [getattr(cls, f[0]).offset for f in cls._fields_]
        assert header_layout(tmp_path, s, fields) == want, s


def rq_ptr(rqs):
    return ctypes.pointer(rqs) if rqs is not None else None


# ---- dilated convolutions ----------------------------------------------------

@st.composite
def dilated_geometry(draw):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dh, dw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    ekh, ekw = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pt, pb = draw(st.integers(0, ekh - 1)), draw(st.integers(0, ekh - 1))
    pl, pr = draw(st.integers(0, ekw - 1)), draw(st.integers(0, ekw - 1))
    # a 4-tap kernel dilated by 4 spans 13 rows: the input must hold one window
    in_h = draw(st.integers(max(1, ekh - pt - pb), max(12, ekh - pt - pb)))
    in_w = draw(st.integers(max(1, ekw - pl - pr), max(12, ekw - pl - pr)))
    return dict(kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pad=(pt, pl, pb, pr), in_h=in_h, in_w=in_w,
                out_h=(in_h + pt + pb - ekh) // sh + 1, out_w=(in_w + pl + pr - ekw) // sw + 1)


def dilated_builder(g, *args, **kw):
    inner = conv_builder(*args, **kw)

    def build(out_ptr, scratch):
        a, keep = inner(out_ptr, scratch)
        a.dh, a.dw = g["dh"], g["dw"]
        return a, keep
    return build


@st.composite
def dilated_cases(draw):
    g = draw(dilated_geometry())
    depthwise = draw(st.booleans())
    in_c = draw(st.integers(1, 6))
    out_c = in_c if depthwise else draw(st.integers(1, 7))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], in_c))
    bias = draw_bias(draw, rng, out_c)
    off = draw(OFFSETS)
    k, s, d = (g["kh"], g["kw"]), (g["sh"], g["sw"]), (g["dh"], g["dw"])
    if depthwise:
        w = int8s(rng, (in_c, g["kh"], g["kw"]))
        acc = ops.depthwise(x, w.transpose(1, 2, 0), bias, off, k, s, g["pad"], d)
    else:
        w = int8s(rng, (out_c, g["kh"], g["kw"], in_c))
        acc = ops.conv2d(x, w, bias, off, k, s, g["pad"], d)
    assert acc.shape == (g["out_h"], g["out_w"], out_c)
    rq = draw_rq(draw, acc, out_c)
    expected, dtype = finish(acc, rq)
    sb = draw(st.sampled_from([0, 4 * g["kh"] * g["kw"] * in_c]))   # scratch is never needed
    build = dilated_builder(g, x, w, bias, expected.shape, g, off, rq, sb)
    fn = "tsr_depthwise" if depthwise else "tsr_conv2d"
    return Case(fn, build, expected, dtype, share_rows, sb), draw(NCORES), rng


@given(dilated_cases())
@SETTINGS
def test_dilated_convolutions_match_golden(lib, case):
    run_case(lib, *case)


def test_dilated_window_golden_by_hand():
    """One tap pattern worked by hand: a 2x2 kernel dilated by 3 reads x[0,0],
    x[0,3], x[3,0], x[3,3] for output (0, 0)."""
    x = np.arange(16, dtype=np.int8).reshape(4, 4, 1)
    w = np.array([1, 10, 100, -1], dtype=np.int8).reshape(1, 2, 2, 1)
    acc = ops.conv2d(x, w, None, 0, (2, 2), (1, 1), (0, 0, 0, 0), (3, 3))
    assert acc.shape == (1, 1, 1) and acc[0, 0, 0] == 0 * 1 + 3 * 10 + 12 * 100 - 15


# ---- broadcast mul / add -------------------------------------------------------

@st.composite
def binary_cases(draw):
    h, w, c = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 9))
    shape_a = [h, w, c]
    shape_b = [d if draw(st.booleans()) else 1 for d in (h, w, c)]
    if draw(st.booleans()):
        shape_a, shape_b = shape_b, shape_a
    out_shape = list(np.broadcast_shapes(tuple(shape_a), tuple(shape_b)))
    a, rng = arrays(draw, shape_a)
    b = int8s(rng, shape_b)
    off = [draw(OFFSETS), draw(OFFSETS)]
    is_mul = draw(st.booleans())
    if is_mul:
        mul = [0, 0]
        acc = ops.mul(a, b, off)
    else:
        mul = [draw(st.integers(-2**20, 2**20)), draw(st.integers(-2**20, 2**20))]
        acc = ops.add(a, b, mul, off)
    rq = draw(requants(1, int(np.abs(acc).max(initial=0)), per_channel=False))
    expected = ops.requantize(acc, rq.golden).astype(np.int8)
    assert list(expected.shape) == out_shape

    def build(out_ptr, scratch):
        rqs = rq.struct()
        args = BinaryArgs(ptr(a, c_int8), ptr(b, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), *out_shape,
                          *shape_a, *shape_b, (c_int32 * 2)(*mul), (c_int32 * 2)(*off), rq_ptr(rqs))
        return args, (a, b, rq, rqs)
    fn = "tsr_mul" if is_mul else "tsr_add_broadcast"
    return Case(fn, build, expected, np.int8, share_rows), draw(NCORES), rng


@given(binary_cases())
@SETTINGS
def test_broadcast_mul_and_add_match_golden(lib, case):
    run_case(lib, *case)


# ---- lookup tables ------------------------------------------------------------------

@st.composite
def lut_cases(draw):
    h, w, c = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 9))
    x, rng = arrays(draw, (h, w, c))
    per_channel = draw(st.booleans())
    table = int8s(rng, (c if per_channel else 1, 256))
    expected = ops.lut(x, table).astype(np.int8)

    def build(out_ptr, scratch):
        args = LutArgs(ptr(x, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), h * w, c, ptr(table, c_int8),
                       int(per_channel))
        return args, (x, table)
    return Case("tsr_lut", build, expected, np.int8, share_pixels), draw(NCORES), rng


@given(lut_cases())
@SETTINGS
def test_lut_matches_golden(lib, case):
    run_case(lib, *case)


def test_tables_follow_the_float_functions():
    """Tables against the float function worked out directly: HardSwish of
    x = 3.0 is 3.0; Sigmoid of 0 is 0.5; PRelu keeps positives."""
    x = (0, 0.05, 0)       # shift, scale, zero point: stored q means 0.05 * q
    y = (0, 0.025, 0)
    hs = lut_table("HardSwish", {}, x, y)
    assert hs[60 + 128] == 120 and hs[0 + 128] == 0 and hs[-100 + 128] == 0
    sg = lut_table("Sigmoid", {}, x, (0, 1 / 256, -128))
    assert sg[0 + 128] == 0 and sg[-128 + 128] < -120 and sg[127 + 128] > 120
    pr = prelu_tables([0.5, 0.0], x, x)
    assert pr[0][10 + 128] == 10 and pr[0][-10 + 128] == -5 and pr[1][-10 + 128] == 0


# ---- concatenation --------------------------------------------------------------------

@st.composite
def concat_cases(draw):
    n = draw(st.integers(1, 4))
    axis = draw(st.integers(0, 2))
    base = [draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 6))]
    shapes = []
    for _ in range(n):
        s = list(base)
        s[axis] = draw(st.integers(1, 5))
        shapes.append(s)
    x0, rng = arrays(draw, shapes[0])
    xs = [x0] + [int8s(rng, s) for s in shapes[1:]]
    offs = [draw(OFFSETS) for _ in range(n)]
    muls = [draw(st.integers(0, 2**20)) for _ in range(n)]
    copy = draw(st.booleans())
    if copy:
        # inputs that share the output's quantization (TFLite's): a copy
        offs, muls = [0] * n, [1] * n
    acc = ops.concat(xs, muls, offs, axis)
    rq = draw(requants(1, int(np.abs(acc).max(initial=0)), per_channel=False))
    if copy:
        rq = Rq([1], None, [0], 0, 0, -128, 127, draw(st.sampled_from(["half_up", "floor"])))
    expected = ops.requantize(acc, rq.golden).astype(np.int8)
    outer = int(np.prod(base[:axis]))
    inner = [int(np.prod(s[axis:])) for s in shapes]

    def build(out_ptr, scratch):
        rqs = rq.struct()
        ins = (POINTER(c_int8) * 8)(*[ptr(x, c_int8) for x in xs])
        pad = lambda v: (c_int32 * 8)(*(list(v) + [0] * (8 - len(v))))  # noqa: E731
        args = ConcatArgs(ins, ctypes.cast(out_ptr, POINTER(c_int8)), n, outer, pad(inner), pad(muls), pad(offs),
                          rq_ptr(rqs))
        return args, (xs, rq, rqs)

    def share(shape, core, ncores):
        # each core writes whole runs of the outer axis
        from test_ref_kernels import rows_share
        m = rows_share(None, core, ncores, axis_len=outer)
        return np.broadcast_to(m.reshape([outer] + [1] * (3 - axis)), [outer] + list(shape[axis:])).reshape(shape)
    return Case("tsr_concat", build, expected, np.int8, share), draw(NCORES), rng


@given(concat_cases())
@SETTINGS
def test_concat_matches_golden(lib, case):
    run_case(lib, *case)


# ---- resize ---------------------------------------------------------------------------

@st.composite
def resize_cases(draw):
    in_h, in_w, c = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 5))
    out_h, out_w = draw(st.integers(1, 13)), draw(st.integers(1, 13))
    mode = draw(st.sampled_from(["nearest", "linear"]))
    coord = draw(st.sampled_from(["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]))
    rule = draw(st.sampled_from(["round_prefer_floor", "floor", "ceil", "round_prefer_ceil"]))
    table = resize_table([in_h, in_w], [out_h, out_w], [out_h / in_h, out_w / in_w], mode, coord, rule)
    x, rng = arrays(draw, (in_h, in_w, c))
    off = draw(OFFSETS)
    acc = ops.resize(x, off, table, out_h, out_w, RESIZE_FRAC)
    rq = draw(requants(1, int(np.abs(acc).max(initial=0)), per_channel=False))
    expected = ops.requantize(acc, rq.golden).astype(np.int8)
    rows = np.array(table[:3 * out_h], dtype=np.int32)
    cols = np.array(table[3 * out_h:], dtype=np.int32)

    def build(out_ptr, scratch):
        rqs = rq.struct()
        args = ResizeArgs(ptr(x, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), in_h, in_w, c, out_h, out_w,
                          ptr(rows, c_int32), ptr(cols, c_int32), off, RESIZE_FRAC, rq_ptr(rqs))
        return args, (x, rows, cols, rq, rqs)
    return Case("tsr_resize", build, expected, np.int8, share_rows), draw(NCORES), rng


@given(resize_cases())
@SETTINGS
def test_resize_matches_golden(lib, case):
    run_case(lib, *case)


def test_resize_tables_by_hand():
    """2 -> 4 bilinear, half_pixel: output 0 sits at -0.25 (clamped to input
    0), output 1 at 0.25 (a quarter of the way to input 1); nearest
    asymmetric x2 repeats each input twice."""
    one = 1 << RESIZE_FRAC
    t = resize_table([1, 2], [1, 4], [1.0, 2.0], "linear", "half_pixel", "round_prefer_floor")
    cols = np.array(t[3:]).reshape(4, 3)
    assert cols.tolist() == [[0, 0, 0], [0, 1, one // 4], [0, 1, 3 * one // 4], [1, 1, 0]]
    t = resize_table([1, 3], [1, 6], [1.0, 2.0], "nearest", "asymmetric", "floor")
    assert [r[0] for r in np.array(t[3:]).reshape(6, 3)] == [0, 0, 1, 1, 2, 2]


# ---- softmax ------------------------------------------------------------------------------

@st.composite
def softmax_cases(draw):
    h, w, c = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 40))
    x, rng = arrays(draw, (h, w, c))
    s_x = draw(st.floats(1e-3, 1.0))
    s_y = draw(st.sampled_from([1 / 256, 1 / 255, 0.01, 0.003]))
    table, mul, shift = softmax_params(s_x, s_y)
    zp = draw(st.integers(-128, 0))
    rq = Requant(mul=[mul], add=[0], shift=[shift], zero_point=zp, lo=-128, hi=127)
    expected = ops.softmax(x, table, rq).astype(np.int8)
    tab = np.array(table, dtype=np.int32)

    def build(out_ptr, scratch):
        args = SoftmaxArgs(ptr(x, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), h * w, c, ptr(tab, c_int32),
                           mul, shift, zp, -128, 127)
        return args, (x, tab)
    return Case("tsr_softmax", build, expected, np.int8, share_pixels), draw(NCORES), rng


@given(softmax_cases())
@SETTINGS
def test_softmax_matches_golden(lib, case):
    run_case(lib, *case)


@pytest.mark.parametrize("s_x,c", [(0.0625, 10), (0.17, 12), (0.02, 2), (0.4, 100), (0.003, 40)])
def test_softmax_tflite_matches_golden(lib, s_x, c):
    """TFLite's reference int8 softmax (rounding "tflite": gemmlowp's sum,
    reciprocal and rounding shift on the frontend's exponential table) in C
    against the golden model, on rows from constant to spread out."""
    from tessera.frontend.tflite_luts import softmax_exp_table

    rng = np.random.default_rng(int(s_x * 1000) + c)
    x = rng.integers(-128, 128, size=(3, 4, c)).astype(np.int8)
    x[0, 0, :] = 7                       # one constant row
    x[0, 1, :] = -128
    x[0, 1, 0] = 127                     # one dominant value
    table = softmax_exp_table(1.0, s_x)
    rq = Requant(mul=[0], add=[0], shift=[0], rounding="tflite", zero_point=-128, lo=-128, hi=127)
    expected = ops.softmax(x, table, rq).astype(np.int8)
    tab = np.array(table, dtype=np.int32)

    def build(out_ptr, scratch):
        args = SoftmaxArgs(ptr(x, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), 12, c, ptr(tab, c_int32),
                           0, 0, -128, -128, 127, 2)   # TSR_ROUND_TFLITE
        return args, (x, tab)
    for ncores in (1, 3):
        run_case(lib, Case("tsr_softmax", build, expected, np.int8, share_pixels), ncores, rng)


@pytest.mark.parametrize("channels, s_x, s_y", [(10, 0.07, 1 / 256), (1000, 0.05, 1 / 256), (1000, 0.05, 0.6)])
def test_softmax_golden_against_float(channels, s_x, s_y):
    """The integer softmax against the float definition: within one output
    step (the rounding of the quantized probability), also for 1000 classes
    and a coarse output scale (the shift stays within 64 bits)."""
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(2, 3, channels)).astype(np.int8)
    table, mul, shift = softmax_params(s_x, s_y, channels=channels)
    y = ops.softmax(x, table, Requant(mul=[mul], add=[0], shift=[shift], zero_point=-128))
    v = x.astype(np.float64) * s_x
    p = np.exp(v - v.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ref = np.clip(np.rint(p / s_y) - 128, -128, 127)
    assert np.abs(y - ref).max() <= 1


# ---- data movement: transpose and gather ---------------------------------------

@st.composite
def transpose_cases(draw):
    shape = tuple(draw(st.integers(1, 7)) for _ in range(3))
    perm = draw(st.permutations([0, 1, 2]))
    x, rng = arrays(draw, shape)
    expected = ops.transpose(x, perm).astype(np.int8)

    def build(out_ptr, scratch):
        args = TransposeArgs(ptr(x, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), *shape, (c_int32 * 3)(*perm))
        return args, (x,)
    return Case("tsr_transpose", build, np.ascontiguousarray(expected), np.int8, share_pixels), draw(NCORES), rng


@given(transpose_cases())
@SETTINGS
def test_transpose_matches_golden(lib, case):
    run_case(lib, *case)


@st.composite
def gather_cases(draw):
    shape = tuple(draw(st.integers(1, 7)) for _ in range(3))
    axis = draw(st.integers(0, 2))
    index = np.asarray(draw(st.lists(st.integers(-1, shape[axis] - 1), min_size=1, max_size=9)), np.int32)
    fill = draw(st.integers(-128, 127))
    x, rng = arrays(draw, shape)
    expected = ops.gather(x, index, axis, fill).astype(np.int8)

    def build(out_ptr, scratch):
        args = GatherArgs(ptr(x, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), *shape, axis, index.size,
                          ptr(index, c_int32), fill)
        return args, (x, index)
    return Case("tsr_gather", build, np.ascontiguousarray(expected), np.int8, share_rows), draw(NCORES), rng


@given(gather_cases())
@SETTINGS
def test_gather_matches_golden(lib, case):
    run_case(lib, *case)


def test_movement_golden_by_hand():
    """HWC -> CHW of a 2x2x3 block, a channel shuffle's even channels."""
    x = np.arange(12).reshape(2, 2, 3)
    assert ops.transpose(x, [2, 0, 1])[1].tolist() == [[1, 4], [7, 10]]
    assert ops.gather(x, [0, 2], 2)[1, 1].tolist() == [9, 11]
    assert ops.gather(x, [-1, 1], 2, fill=-5)[0, 1].tolist() == [-5, 4]
    assert ops.reshape(x, [1, 3, 4])[0, 1].tolist() == [4, 5, 6, 7]


# ---- asymmetric (uint8) weights: a weight offset ----------------------------------

@st.composite
def weight_offset_cases(draw):
    """conv2d, depthwise, pointwise and linear with every weight offset by a
    constant (TF1's uint8 weights less their zero point span 9 bits):
    acc += (x + input_offset) * (w + weight_offset)."""
    from test_ref_kernels import ONE, geometry, share_channels, share_pixels
    op = draw(st.sampled_from(["conv2d", "depthwise", "pointwise", "linear"]))
    woff = draw(st.integers(-127, 128))
    off = draw(OFFSETS)
    if op in ("conv2d", "depthwise"):
        g = draw(geometry())
        in_c = draw(st.integers(1, 5))
        out_c = in_c if op == "depthwise" else draw(st.integers(1, 6))
        x, rng = arrays(draw, (g["in_h"], g["in_w"], in_c))
        k, s = (g["kh"], g["kw"]), (g["sh"], g["sw"])
        if op == "conv2d":
            w = int8s(rng, (out_c, g["kh"], g["kw"], in_c))
            acc = ops.conv2d(x, w.astype(np.int64) + woff, None, off, k, s, g["pad"])
        else:
            w = int8s(rng, (in_c, g["kh"], g["kw"]))
            acc = ops.depthwise(x, w.transpose(1, 2, 0).astype(np.int64) + woff, None, off, k, s, g["pad"])
        share = share_rows
    else:
        h, wd, in_c = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 9))
        out_c = draw(st.integers(1, 9))
        x, rng = arrays(draw, (h, wd, in_c))
        if op == "pointwise":
            w = int8s(rng, (out_c, in_c))
            acc = ops.pointwise(x, w.astype(np.int64) + woff, None, off)
            g, share = ONE, share_pixels
        else:
            w = int8s(rng, (out_c, h * wd * in_c))
            acc = ops.linear(x, w.astype(np.int64) + woff, None, off)
            g, share = dict(ONE, kh=h, kw=wd), share_channels
    bias = draw_bias(draw, rng, out_c)
    if bias is not None:
        acc = acc + bias
    rq = draw_rq(draw, acc, out_c, tflite=True)
    expected, dtype = finish(acc, rq)
    inner = conv_builder(x, w, bias, expected.shape, g, off, rq, 4 * 2 * g["kh"] * g["kw"] * x.shape[2])

    def build(out_ptr, scratch):
        a, keep = inner(out_ptr, scratch)
        a.weight_offset = woff
        return a, keep
    sb = 4 * 2 * g["kh"] * g["kw"] * x.shape[2]
    return Case("tsr_" + op, build, expected, dtype, share, sb), draw(NCORES), rng


@given(weight_offset_cases())
@SETTINGS
def test_weight_offset_matches_golden(lib, case):
    run_case(lib, *case)


# ---- a LeakyRelu folded into the requantization: a multiplier per sign -----------

@given(st.integers(0, 2**32 - 1), st.sampled_from(["half_up", "floor"]), NCORES)
@SETTINGS
def test_negative_accumulator_multiplier_matches_golden(lib, seed, rounding, ncores):
    """A pointwise layer whose negative accumulators take their own
    multiplier and shift (Requant.neg_mul, neg_shift)."""
    rng = np.random.default_rng(seed)
    x, w = int8s(rng, (3, 4, 7)), int8s(rng, (5, 7))
    bias = rng.integers(-2000, 2000, 5).astype(np.int32)
    acc = ops.pointwise(x, w, bias, 3)
    mul, shift = [int(rng.integers(1 << 28, 1 << 31))], [int(rng.integers(20, 26))]
    neg_mul, neg_shift = [int(rng.integers(1 << 28, 1 << 31))], [shift[0] + int(rng.integers(0, 5))]
    rq = Requant(mul=mul, add=[0], shift=shift, rounding=rounding, zero_point=-7, lo=-128, hi=127,
                 neg_mul=neg_mul, neg_shift=neg_shift)
    expected = ops.requantize(acc, rq).astype(np.int8)
    assert (acc < 0).any() and (acc > 0).any()
    from test_ref_kernels import ONE, ROUNDING_C, RequantT, share_pixels

    arrays_ = {k: np.array(v, dtype=t) for k, v, t in (("mul", mul, np.int32), ("shift", shift, np.int8),
                                                       ("nm", neg_mul, np.int32), ("ns", neg_shift, np.int8))}

    def build(out_ptr, scratch):
        rqs = RequantT(ptr(arrays_["mul"], c_int32), None, ptr(arrays_["shift"], c_int8), 0, -7, -128, 127,
                       ROUNDING_C[rounding])
        rqs.neg_mul, rqs.neg_shift = ptr(arrays_["nm"], c_int32), ptr(arrays_["ns"], c_int8)
        a, keep = conv_builder(x, w, bias, expected.shape, ONE, 3, None)(out_ptr, scratch)
        a.rq = ctypes.pointer(rqs)
        return a, (keep, rqs, arrays_)
    run_case(lib, Case("tsr_pointwise", build, expected, np.int8, share_pixels), ncores, rng)
