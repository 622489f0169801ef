"""The fused depthwise -> pointwise kernels (kernels/reference/dw_pw.c,
kernels/pulp_nn/dw_pw.c) against the golden model's two layers run apart, bit
for bit, on random tiles (hypothesis): any depthwise geometry, padding and
stride, any block height fd, 1, 3 or 8 cores, both requantizations drawn
independently, the depthwise's stripe scratch big enough or not."""

import ctypes
from ctypes import POINTER, c_int, c_int8, c_int32

import numpy as np
from hypothesis import given, strategies as st

from test_ref_kernels import (NCORES, OFFSETS, SETTINGS, Case, ConvArgs, RequantT, arrays, conv_struct,  # noqa: F401
                              draw_bias, draw_rq, finish, geometry, header_layout, int8s, lib, requants, run_case,
                              share_channels, share_rows)
from test_pulp_nn_kernels import pnn  # noqa: F401
from tessera.golden import ops


class DwPwArgs(ctypes.Structure):
    _fields_ = [("dw", ConvArgs), ("pw", ConvArgs), ("buf", POINTER(c_int8)), ("fd", c_int32)]


def declare(fn, *argtypes):
    fn.argtypes = list(argtypes)
    fn.restype = None


def poisoned_output(case, rng):
    """The case's output buffer, filled with random bytes."""
    size = case.expected.size * case.out_dtype.itemsize
    return np.random.default_rng(int(rng.integers(2**31))).integers(0, 256, size=size, dtype=np.uint8)


def run_blocks(block, args, total, fd, first, second, ncores, *extra):
    """The shared scheme of the generated PULP-NN fused steps: per block of
    fd (rows or channels) of `total`, block() fills two conv argument
    structs, then `first` runs on every core on the one, `second` on the
    other."""
    a, b = ConvArgs(), ConvArgs()
    for i in range(0, total, fd):
        block(ctypes.byref(args), i, min(fd, total - i), ctypes.byref(a), ctypes.byref(b), *extra)
        for fn, s in ((first, a), (second, b)):
            for k in range(ncores):
                fn(ctypes.byref(s), k, ncores)


def assert_output(out, case):
    np.testing.assert_array_equal(out.view(case.out_dtype).reshape(case.expected.shape), case.expected)


def test_struct_layout(lib, tmp_path):
    """The ctypes mirror has the header's size (the fields are two conv
    structs, a pointer and an int, so the size pins the layout)."""
    got = header_layout(tmp_path, "tsr_dw_pw_args_t", ["pw", "buf", "fd"])
    assert got == [ctypes.sizeof(DwPwArgs), DwPwArgs.pw.offset, DwPwArgs.buf.offset, DwPwArgs.fd.offset]


@st.composite
def dw_pw_cases(draw):
    g = draw(geometry())
    ch, out_c = draw(st.integers(1, 9)), draw(st.integers(1, 12))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], ch))
    w1 = int8s(rng, (ch, g["kh"], g["kw"]))
    b1 = draw_bias(draw, rng, ch)
    off1 = draw(OFFSETS)
    acc1 = ops.depthwise(x, w1.transpose(1, 2, 0), b1, off1, (g["kh"], g["kw"]), (g["sh"], g["sw"]), g["pad"])
    rq1 = draw(requants(ch, int(np.abs(acc1).max(initial=0)), tflite=True))   # the intermediate is int8
    mid = ops.requantize(acc1, rq1.golden).astype(np.int8)
    w2 = int8s(rng, (out_c, ch))
    b2 = draw_bias(draw, rng, out_c)
    off2 = draw(OFFSETS)
    acc2 = ops.pointwise(mid, w2, b2, off2)
    rq2 = draw_rq(draw, acc2, out_c, tflite=True)
    expected, dtype = finish(acc2, rq2)
    out_h, out_w = g["out_h"], g["out_w"]
    fd = draw(st.integers(1, out_h + 1))
    one = dict(kh=1, kw=1, sh=1, sw=1, pad=(0, 0, 0, 0))
    # per-core stripe scratch for the depthwise: enough, or too small (direct loop)
    stripe = ((fd - 1) * g["sh"] + g["kh"]) * g["kw"]
    stripe = draw(st.sampled_from([0, stripe - 1, stripe])) if stripe > 1 else stripe
    dw_scratch = np.zeros(max(1, 8 * stripe), dtype=np.int8)

    def build(out_ptr, scratch):
        r1, r2 = rq1.struct(), (rq2.struct() if rq2 is not None else None)
        dw = conv_struct(x, w1, b1, None, (out_h, out_w, ch), g, off1, r1,
                         dw_scratch.ctypes.data_as(POINTER(c_int8)) if stripe else None, stripe)
        pw = conv_struct(mid, w2, b2, out_ptr, (out_h, out_w, out_c), one, off2, r2, None, 0)
        pw.in_ = None     # the kernel reads its own intermediate, never this
        return DwPwArgs(dw, pw, scratch, fd), (x, w1, b1, w2, b2, r1, r2, rq1, rq2, dw_scratch)
    sb = fd * out_w * ch
    return Case("tsr_dw_pw", build, expected, dtype, share_rows, sb), draw(NCORES), rng


@given(dw_pw_cases())
@SETTINGS
def test_dw_pw_matches_two_layers(lib, case):
    declare(lib.tsr_dw_pw, POINTER(DwPwArgs), c_int, c_int)
    run_case(lib, *case)


@given(dw_pw_cases())
@SETTINGS
def test_pulp_nn_dw_pw_matches_two_layers(pnn, case):
    declare(pnn.pnn_dw_pw, POINTER(DwPwArgs), c_int, c_int)
    c, ncores, rng = case
    c.fn = "pnn_dw_pw"
    run_case(pnn, c, ncores, rng)


@given(dw_pw_cases())
@SETTINGS
def test_pulp_nn_shared_blocks_match_two_layers(pnn, case):
    """The shared scheme the generated PULP-NN fused steps run: per block of
    fd rows, pnn_dw_pw_block's arguments, the depthwise on every core (a
    fork), then the pointwise on every core, over one fd-row intermediate."""
    c, ncores, rng = case
    P = POINTER(ConvArgs)
    declare(pnn.pnn_dw_pw_block, POINTER(DwPwArgs), c_int32, c_int32, P, P)
    for fn in (pnn.pnn_depthwise, pnn.pnn_pointwise):
        declare(fn, P, c_int, c_int)
    out = poisoned_output(c, rng)
    mid = np.zeros(max(1, c.scratch_bytes), dtype=np.int8)
    args, keep = c.build(out.ctypes.data, mid.ctypes.data_as(POINTER(c_int8)))
    run_blocks(pnn.pnn_dw_pw_block, args, c.expected.shape[0], args.fd, pnn.pnn_depthwise, pnn.pnn_pointwise,
               ncores)
    del keep
    assert_output(out, c)


class PwDwArgs(ctypes.Structure):
    _fields_ = [("pw", ConvArgs), ("dw", ConvArgs), ("buf", POINTER(c_int8)), ("fd", c_int32)]


def test_pw_dw_struct_layout(lib, tmp_path):
    got = header_layout(tmp_path, "tsr_pw_dw_args_t", ["dw", "buf", "fd"])
    assert got == [ctypes.sizeof(PwDwArgs), PwDwArgs.dw.offset, PwDwArgs.buf.offset, PwDwArgs.fd.offset]


@st.composite
def pw_dw_cases(draw):
    """A pointwise over the tile, then a depthwise (any geometry, padding and
    stride) of its int8 output; fd channels per block."""
    g = draw(geometry())
    ci, cm = draw(st.integers(1, 9)), draw(st.integers(1, 12))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], ci))
    w1 = int8s(rng, (cm, ci))
    b1 = draw_bias(draw, rng, cm)
    off1 = draw(OFFSETS)
    acc1 = ops.pointwise(x, w1, b1, off1)
    rq1 = draw(requants(cm, int(np.abs(acc1).max(initial=0)), tflite=True))   # the intermediate is int8
    mid = ops.requantize(acc1, rq1.golden).astype(np.int8)
    w2 = int8s(rng, (cm, g["kh"], g["kw"]))
    b2 = draw_bias(draw, rng, cm)
    off2 = draw(OFFSETS)
    acc2 = ops.depthwise(mid, w2.transpose(1, 2, 0), b2, off2, (g["kh"], g["kw"]), (g["sh"], g["sw"]), g["pad"])
    rq2 = draw(requants(cm, int(np.abs(acc2).max(initial=0)), tflite=True))    # the fused output is int8
    expected, dtype = finish(acc2, rq2)
    fd = draw(st.integers(1, cm + 1))
    one = dict(kh=1, kw=1, sh=1, sw=1, pad=(0, 0, 0, 0))

    def build(out_ptr, scratch):
        r1, r2 = rq1.struct(), rq2.struct()
        pw = conv_struct(x, w1, b1, None, (g["in_h"], g["in_w"], cm), one, off1, r1, None, 0)
        dw = conv_struct(mid, w2, b2, out_ptr, (g["out_h"], g["out_w"], cm), g, off2, r2, None, 0)
        dw.in_ = None     # the kernel reads its own intermediate, never this
        return PwDwArgs(pw, dw, scratch, fd), (x, w1, b1, w2, b2, r1, r2, rq1, rq2)
    sb = fd * g["in_h"] * g["in_w"]
    return Case("tsr_pw_dw", build, expected, dtype, share_channels, sb), draw(NCORES), rng


@given(pw_dw_cases())
@SETTINGS
def test_pw_dw_matches_two_layers(lib, case):
    declare(lib.tsr_pw_dw, POINTER(PwDwArgs), c_int, c_int)
    run_case(lib, *case)


@given(pw_dw_cases(), st.sampled_from(["none", "short", "plane"]))
@SETTINGS
def test_pulp_nn_pw_dw_blocks_match_two_layers(pnn, case, scratch):
    """The shared PW->DW scheme the generated PULP-NN steps run: per block of
    fd channels, pnn_pw_dw_block's arguments, the library's pointwise on
    every core (a fork), then pnn_depthwise_block on every core, over one
    fd-channel intermediate; the depthwise without stripe scratch, with a
    too-small one (direct loop), or with a padded plane per core."""
    c, ncores, rng = case
    P = POINTER(ConvArgs)
    declare(pnn.pnn_pw_dw_block, POINTER(PwDwArgs), c_int32, c_int32, P, P, POINTER(RequantT))
    for fn in (pnn.pnn_pointwise, pnn.pnn_depthwise_block):
        declare(fn, P, c_int, c_int)
    out = poisoned_output(c, rng)
    args, keep = c.build(out.ctypes.data, None)
    fd, cm = args.fd, c.expected.shape[-1]
    dw = args.dw
    rows = (dw.out_h - 1) * dw.sh + dw.kh
    per_core = {"none": 0, "short": rows * dw.kw - 1,
                "plane": rows * (dw.in_w + dw.pad_l + dw.pad_r) + 4}[scratch]
    stripes = np.zeros(max(1, per_core * ncores), dtype=np.int8)
    if per_core > 0:
        args.dw.scratch, args.dw.scratch_bytes = stripes.ctypes.data_as(POINTER(c_int8)), per_core
    mid = np.full(fd * args.pw.in_h * args.pw.in_w, 77, dtype=np.int8)
    args.buf = mid.ctypes.data_as(POINTER(c_int8))
    run_blocks(pnn.pnn_pw_dw_block, args, cm, fd, pnn.pnn_pointwise, pnn.pnn_depthwise_block, ncores,
               (RequantT * 2)())
    del keep
    assert_output(out, c)


@st.composite
def pw_dw_rows_cases(draw):
    """The same two layers, fused row-wise: fd depthwise output rows per
    block, the shifted buffer of (fd - 1) * sh + kh pointwise rows."""
    (c, ncores, rng) = draw(pw_dw_cases())
    args, keep = c.build(None, None)
    out_h, sh, kh, w, cm = args.dw.out_h, args.dw.sh, args.dw.kh, args.pw.in_w, args.pw.out_c
    fd = draw(st.integers(1, out_h + 1))
    build = c.build

    def rows_build(out_ptr, scratch):
        a, k = build(out_ptr, scratch)
        a.fd = fd
        return a, k
    del keep
    sb = ((fd - 1) * sh + kh) * w * cm
    return Case("tsr_pw_dw_rows", rows_build, c.expected, c.out_dtype, share_rows, sb), ncores, rng


@given(pw_dw_rows_cases())
@SETTINGS
def test_pw_dw_rows_matches_two_layers(lib, case):
    declare(lib.tsr_pw_dw_rows, POINTER(PwDwArgs), c_int, c_int)
    run_case(lib, *case)


@given(pw_dw_rows_cases(), st.sampled_from(["none", "plane"]))
@SETTINGS
def test_pulp_nn_pw_dw_rows_blocks_match_two_layers(pnn, case, scratch):
    """The shared row-wise scheme: per block of fd rows pnn_pw_dw_rows_block
    (the shift, the new rows' pointwise, the block's depthwise), each half
    on every core in turn."""
    c, ncores, rng = case
    P = POINTER(ConvArgs)
    declare(pnn.pnn_pw_dw_rows_block, POINTER(PwDwArgs), c_int32, c_int32, P, P)
    for fn in (pnn.pnn_pointwise, pnn.pnn_depthwise):
        declare(fn, P, c_int, c_int)
    out = poisoned_output(c, rng)
    mid = np.full(c.scratch_bytes, 77, dtype=np.int8)
    args, keep = c.build(out.ctypes.data, mid.ctypes.data_as(POINTER(c_int8)))
    dw = args.dw
    per_core = (((args.fd - 1) * dw.sh + dw.kh) * (dw.in_w + dw.pad_l + dw.pad_r) + 4) if scratch == "plane" else 0
    stripes = np.zeros(max(1, per_core * ncores), dtype=np.int8)
    if per_core:
        args.dw.scratch, args.dw.scratch_bytes = stripes.ctypes.data_as(POINTER(c_int8)), per_core
    run_blocks(pnn.pnn_pw_dw_rows_block, args, c.expected.shape[0], args.fd, pnn.pnn_pointwise, pnn.pnn_depthwise,
               ncores)
    del keep
    assert_output(out, c)
