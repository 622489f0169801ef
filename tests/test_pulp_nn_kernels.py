"""tessera's PULP-NN-style kernels (kernels/pulp_nn/*.c), compiled by the host
gcc and called through ctypes with each core index, against the golden
model bit for bit, on random tiles drawn by hypothesis (the machinery of
tests/test_ref_kernels.py: every core in turn on the same buffers must give
the whole tile; each core alone must write exactly its share, on poisoned
output and scratch).

What differs from the reference kernels: the work split (output pixels or,
when that is more even, output channels in fours; depthwise by channel),
and the scratch each kernel wants (im2col of two pixels; a depthwise column
stripe, gathered by the core out of the HWC tile). The
same kernels run on eight harts under QEMU in tests/test_gap8_qemu.py.
"""

import ctypes
import os
import shutil
import subprocess
from ctypes import POINTER, c_int, c_int8

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tessera.golden import ops
from test_ref_kernels import (CFLAGS, INCLUDE, NCORES, OFFSETS, ONE, SETTINGS, AddArgs, Case, ConvArgs,
                              PoolArgs, Rq, _libc_flags, add_builder, arrays, conv_builder, conv_struct,
                              draw_bias, draw_rq, finish, full_requant, geometry, int8s, pool_builder, ptr,
                              requants, run_case, tile_input)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PNN_DIR = os.path.join(ROOT, "kernels", "pulp_nn")
SOURCES = sorted(os.path.join(PNN_DIR, f) for f in os.listdir(PNN_DIR) if f.endswith(".c"))

# offsets that take the four-byte dot-product path (0) and the uint8 one (128) often
PNN_OFFSETS = st.one_of(st.just(0), st.just(128), OFFSETS)


@pytest.fixture(scope="session")
def pnn(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no host gcc to compile the kernels")
    so = tmp_path_factory.mktemp("pnn") / "libtsr_pnn.so"
    extra = os.environ.get("TESSERA_REF_CFLAGS", "").split()
    cmd = [gcc, *CFLAGS, *extra, "-shared", "-fPIC", "-I", INCLUDE, *SOURCES, "-o", str(so)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stderr}"
    dll = ctypes.CDLL(str(so))
    for name, cls in (("conv2d", ConvArgs), ("pointwise", ConvArgs), ("depthwise", ConvArgs),
                      ("linear", ConvArgs), ("maxpool", PoolArgs), ("avgpool", PoolArgs), ("add", AddArgs)):
        fn = getattr(dll, "pnn_" + name)
        fn.argtypes = [POINTER(cls), c_int, c_int]
        fn.restype = None
    return dll


CROSS = {
    "riscv64-unknown-elf-gcc (rv32imc)": ["riscv64-unknown-elf-gcc", "-misa-spec=2.2", "-march=rv32imc",
                                          "-mabi=ilp32"],
    "arm-none-eabi-gcc (cortex-m7)": ["arm-none-eabi-gcc", "-mcpu=cortex-m7", "-mthumb"],
}


@pytest.mark.parametrize("target", sorted(CROSS))
def test_kernels_compile_cleanly(target, tmp_path):
    cc, *machine = CROSS[target]
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    flags = _libc_flags(cc, tmp_path)
    for src in SOURCES:
        cmd = [cc, *flags, *machine, *CFLAGS, "-I", INCLUDE, "-c", src, "-o", str(tmp_path / "k.o")]
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0 and res.stderr == "", f"{' '.join(cmd)}\n{res.stderr}"


# ---- the work split (kernels/pulp_nn/pnn_common.h) -------------------------

def chunk(n, quantum, core, ncores):
    """[begin, end) of pnn_chunk."""
    size = -(-n // ncores)
    size = -(-size // quantum) * quantum
    b = min(size * core, n)
    return b, min(b + size, n)


def split(pixels, channels, pq, cq, core, ncores):
    """This core's (pixels, channels) ranges under pnn_split."""
    per_p = -(-(-(-pixels // ncores)) // pq) * pq
    per_c = -(-(-(-channels // ncores)) // cq) * cq
    per_p, per_c = min(per_p, pixels), min(per_c, channels)
    if per_p * channels <= pixels * per_c:
        return chunk(pixels, pq, core, ncores), (0, channels)
    return (0, pixels), chunk(channels, cq, core, ncores)


def share_pixels_or_channels(pq, cq):
    def share(shape, core, ncores):
        h, w, c = shape
        (p0, p1), (c0, c1) = split(h * w, c, pq, cq, core, ncores)
        m = np.zeros((h * w, c), dtype=bool)
        m[p0:p1, c0:c1] = True
        return m.reshape(shape)
    return share


def mask(shape, axis, begin, end):
    m = np.zeros(shape, dtype=bool)
    idx = [slice(None)] * len(shape)
    idx[axis] = slice(begin, end)
    m[tuple(idx)] = True
    return m


def share_channels(quantum):
    return lambda shape, core, ncores: mask(shape, 2, *chunk(shape[2], quantum, core, ncores))


def share_flat(shape, core, ncores):
    return mask((int(np.prod(shape)),), 0, *chunk(int(np.prod(shape)), 1, core, ncores)).reshape(shape)


# ---- conv-like tiles -------------------------------------------------------

@st.composite
def conv_cases(draw):
    g = draw(geometry())
    in_c, out_c = draw(st.integers(1, 8)), draw(st.integers(1, 13))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], in_c))
    w = int8s(rng, (out_c, g["kh"], g["kw"], in_c))
    bias = draw_bias(draw, rng, out_c)
    off = draw(PNN_OFFSETS)
    acc = ops.conv2d(x, w, bias, off, (g["kh"], g["kw"]), (g["sh"], g["sw"]), g["pad"])
    rq = draw_rq(draw, acc, out_c, tflite=True)
    expected, dtype = finish(acc, rq)
    patch = g["kh"] * g["kw"] * in_c
    # no scratch or too little (direct loop), exactly two pixels, more
    sb = draw(st.sampled_from([0, 2 * patch - 1, 2 * patch, 2 * patch + 13]))
    build = conv_builder(x, w, bias, expected.shape, g, off, rq, sb)
    return Case("pnn_conv2d", build, expected, dtype, share_pixels_or_channels(2, 4), sb), draw(NCORES), rng


@given(conv_cases())
@SETTINGS
def test_conv2d_matches_golden(pnn, case):
    c, ncores, rng = case
    run_case(pnn, c, ncores, rng)


def stripe_bytes(g, out_h):
    """Scratch one core's column stripe needs (pnn_depthwise)."""
    return ((out_h - 1) * g["sh"] + g["kh"]) * g["kw"]


@st.composite
def depthwise_cases(draw):
    g = draw(geometry())
    ch = draw(st.integers(1, 19))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], ch))
    w = int8s(rng, (ch, g["kh"], g["kw"]))
    bias = draw_bias(draw, rng, ch)
    off = draw(PNN_OFFSETS)
    acc = ops.depthwise(x, w.transpose(1, 2, 0), bias, off, (g["kh"], g["kw"]), (g["sh"], g["sw"]), g["pad"])
    rq = draw_rq(draw, acc, ch, tflite=True)
    expected, dtype = finish(acc, rq)
    need = stripe_bytes(g, expected.shape[0])
    # the library.yaml terms give kw * in_h + 2 * kh * kw: at least `need`
    sb = draw(st.sampled_from([0, need - 1, need, g["kw"] * g["in_h"] + 2 * g["kh"] * g["kw"]]))
    build = conv_builder(x, w, bias, expected.shape, g, off, rq, sb)
    return Case("pnn_depthwise", build, expected, dtype, share_channels(1), sb), draw(NCORES), rng


@given(depthwise_cases())
@SETTINGS
def test_depthwise_matches_golden(pnn, case):
    c, ncores, rng = case
    run_case(pnn, c, ncores, rng)


@st.composite
def depthwise3x3_cases(draw):
    """3x3 (its own path: registers, the offset folded into the bias),
    stride 1 or 2, any padding up to 2 on each side of the tile."""
    sh, sw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(4))
    in_h = draw(st.integers(max(1, 3 - pad[0] - pad[2]), 9))
    in_w = draw(st.integers(max(1, 3 - pad[1] - pad[3]), 9))
    g = dict(kh=3, kw=3, sh=sh, sw=sw, pad=pad, in_h=in_h, in_w=in_w)
    ch = draw(st.integers(1, 19))
    x, rng = arrays(draw, (in_h, in_w, ch))
    w = int8s(rng, (ch, 3, 3))
    bias = draw_bias(draw, rng, ch)
    off = draw(PNN_OFFSETS)
    acc = ops.depthwise(x, w.transpose(1, 2, 0), bias, off, (3, 3), (sh, sw), pad)
    rq = draw_rq(draw, acc, ch, tflite=True)
    expected, dtype = finish(acc, rq)
    sb = stripe_bytes(g, expected.shape[0])
    build = conv_builder(x, w, bias, expected.shape, g, off, rq, sb)
    return Case("pnn_depthwise", build, expected, dtype, share_channels(1), sb), draw(NCORES), rng


@given(depthwise3x3_cases())
@SETTINGS
def test_depthwise_3x3_matches_golden(pnn, case):
    c, ncores, rng = case
    run_case(pnn, c, ncores, rng)


@st.composite
def pointwise_cases(draw):
    h, wd = draw(st.integers(1, 9)), draw(st.integers(1, 6))
    in_c, out_c = draw(st.sampled_from([1, 3, 4, 8, 12, 17])), draw(st.integers(1, 21))
    x, rng = arrays(draw, (h, wd, in_c))
    w = int8s(rng, (out_c, in_c))
    bias = draw_bias(draw, rng, out_c)
    off = draw(PNN_OFFSETS)
    acc = ops.pointwise(x, w, bias, off)
    rq = draw_rq(draw, acc, out_c, tflite=True)
    expected, dtype = finish(acc, rq)
    build = conv_builder(x, w, bias, expected.shape, ONE, off, rq)
    return Case("pnn_pointwise", build, expected, dtype, share_pixels_or_channels(2, 4)), draw(NCORES), rng


@given(pointwise_cases())
@SETTINGS
def test_pointwise_matches_golden(pnn, case):
    c, ncores, rng = case
    run_case(pnn, c, ncores, rng)


@st.composite
def linear_cases(draw):
    h, wd, in_c = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.sampled_from([1, 4, 5, 16]))
    out_c = draw(st.integers(1, 40))
    x, rng = arrays(draw, (h, wd, in_c))
    w = int8s(rng, (out_c, h * wd * in_c))
    bias = draw_bias(draw, rng, out_c)
    off = draw(PNN_OFFSETS)
    acc = ops.linear(x, w, bias, off)
    rq = draw_rq(draw, acc, out_c, tflite=True)
    expected, dtype = finish(acc, rq)
    build = conv_builder(x, w, bias, expected.shape, dict(ONE, kh=h, kw=wd), off, rq)
    return Case("pnn_linear", build, expected, dtype, share_channels(4)), draw(NCORES), rng


@given(linear_cases())
@SETTINGS
def test_linear_matches_golden(pnn, case):
    c, ncores, rng = case
    run_case(pnn, c, ncores, rng)


# ---- pools and add ---------------------------------------------------------

@st.composite
def maxpool_cases(draw):
    g = draw(geometry(pad_max_is_k=False))
    ch = draw(st.integers(1, 12))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], ch))
    expected = ops.maxpool(x, (g["kh"], g["kw"]), (g["sh"], g["sw"]), g["pad"]).astype(np.int8)
    build = pool_builder(x, expected.shape, g, draw(OFFSETS), None)
    return Case("pnn_maxpool", build, expected, np.int8, share_pixels_or_channels(1, 1)), draw(NCORES), rng


@given(maxpool_cases())
@SETTINGS
def test_maxpool_matches_golden(pnn, case):
    c, ncores, rng = case
    run_case(pnn, c, ncores, rng)


@st.composite
def avgpool_cases(draw):
    g = draw(geometry(pads=False))
    ch = draw(st.integers(1, 12))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], ch))
    off = draw(OFFSETS)
    acc = ops.avgpool_sum(x, off, (g["kh"], g["kw"]), (g["sh"], g["sw"]))
    rq = draw(requants(ch, int(np.abs(acc).max(initial=0)), tflite=True))
    expected, dtype = finish(acc, rq)
    build = pool_builder(x, expected.shape, g, off, rq)
    return Case("pnn_avgpool", build, expected, dtype, share_pixels_or_channels(1, 1)), draw(NCORES), rng


@given(avgpool_cases())
@SETTINGS
def test_avgpool_matches_golden(pnn, case):
    c, ncores, rng = case
    run_case(pnn, c, ncores, rng)


@st.composite
def add_cases(draw):
    shape = (draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 8)))
    a, rng = arrays(draw, shape)
    b = int8s(rng, shape)
    in_offset = [draw(OFFSETS), draw(OFFSETS)]
    if draw(st.booleans()):
        # what the frontend makes: in_mul up to 2**30, the scale in the shift
        in_mul = [draw(st.integers(0, 2**30)), draw(st.integers(0, 2**30))]
        acc = ops.add(a, b, in_mul, in_offset)
        rq = draw(requants(1, int(np.abs(acc).max(initial=0)), per_channel=False, mul_max=2**20))
    else:
        in_mul = [draw(st.integers(-2**21, 2**21)), draw(st.integers(-2**21, 2**21))]
        acc = ops.add(a, b, in_mul, in_offset)
        rq = None
    expected, dtype = finish(acc, rq)
    build = add_builder(a, b, in_mul, in_offset, rq)
    return Case("pnn_add", build, expected, dtype, share_flat), draw(NCORES), rng


@given(add_cases())
@SETTINGS
def test_add_matches_golden(pnn, case):
    c, ncores, rng = case
    run_case(pnn, c, ncores, rng)


# ---- fixed cases -------------------------------------------------------------

@pytest.mark.parametrize("op", ["conv2d", "depthwise", "pointwise", "linear"])
@pytest.mark.parametrize("ncores", [1, 8])
def test_channel_tile_of_larger_weights(pnn, op, ncores):
    """A channel tile: weights, bias and requant arrays point into the
    layer's arrays at the tile's first channel."""
    rng = np.random.default_rng(11)
    co_total, c0, tc = 37, 8, 20
    g = dict(ONE) if op == "pointwise" else dict(kh=3, kw=3, sh=1, sw=2, pad=(1, 1, 1, 0))
    kern, strd = (g["kh"], g["kw"]), (g["sh"], g["sw"])
    x_full = int8s(rng, (9, 6, co_total if op == "depthwise" else 8))
    bias = rng.integers(-5000, 5000, size=co_total).astype(np.int32)
    off = 128
    x = x_full
    if op == "conv2d":
        w = int8s(rng, (co_total, 3, 3, 8))
        acc = ops.conv2d(x_full, w, bias, off, kern, strd, g["pad"])
    elif op == "depthwise":
        w = int8s(rng, (co_total, 3, 3))
        acc = ops.depthwise(x_full, w.transpose(1, 2, 0), bias, off, kern, strd, g["pad"])
        x = x_full[:, :, c0:c0 + tc]
    elif op == "pointwise":
        w = int8s(rng, (co_total, 8))
        acc = ops.pointwise(x_full, w, bias, off)
    else:
        w = int8s(rng, (co_total, x_full.size))
        acc = ops.linear(x_full, w, bias, off)
    rq = full_requant(rng, co_total, acc)
    expected = ops.requantize(acc, rq.golden).astype(np.int8)[:, :, c0:c0 + tc]
    assert len(np.unique(expected)) > min(10, expected.size // 2)
    if op == "depthwise":
        sb = stripe_bytes(g, expected.shape[0])
        build = conv_builder(x, w[c0:], bias[c0:], expected.shape, g, off, rq, sb, first_channel=c0)
        share = share_channels(1)
    else:
        sb = 2 * 3 * 3 * 8 if op == "conv2d" else 0
        build = conv_builder(x, w[c0:], bias[c0:], expected.shape, g, off, rq, sb, first_channel=c0)
        share = share_channels(4) if op == "linear" else share_pixels_or_channels(2, 4)
    run_case(pnn, Case("pnn_" + op, build, expected, np.int8, share, sb), ncores, rng)


@pytest.mark.parametrize("off", [-128, 129, 300])
def test_offsets_im2col_cannot_store(pnn, off):
    """Padding is stored as int8 -off; other offsets take the direct loops."""
    rng = np.random.default_rng(3)
    g = dict(kh=3, kw=3, sh=1, sw=2, pad=(1, 2, 1, 0), in_h=5, in_w=6)
    x, w = int8s(rng, (5, 6, 3)), int8s(rng, (4, 3, 3, 3))
    acc = ops.conv2d(x, w, None, off, (3, 3), (1, 2), g["pad"])
    run_case(pnn, Case("pnn_conv2d", conv_builder(x, w, None, acc.shape, g, off, None, 54),
                       acc.astype(np.int32), np.int32, share_pixels_or_channels(2, 4), 54), 3, rng)
    wd = int8s(rng, (3, 3, 3))
    acc = ops.depthwise(x, wd.transpose(1, 2, 0), None, off, (3, 3), (1, 2), g["pad"])
    sb = stripe_bytes(g, acc.shape[0])
    run_case(pnn, Case("pnn_depthwise", conv_builder(x, wd, None, acc.shape, g, off, None, sb),
                       acc.astype(np.int32), np.int32, share_channels(1), sb), 3, rng)


@st.composite
def tiled_depthwise(draw):
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pad = (draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)),
           draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)))
    h = draw(st.integers(max(1, kh - pad[0] - pad[2]), 12))
    w = draw(st.integers(max(1, kw - pad[1] - pad[3]), 12))
    ho, wo = (h + pad[0] + pad[2] - kh) // sh + 1, (w + pad[1] + pad[3] - kw) // sw + 1
    return dict(kh=kh, kw=kw, sh=sh, sw=sw, pad=pad, h=h, w=w, c=draw(st.integers(1, 10)), ho=ho, wo=wo,
                th=draw(st.integers(1, ho)), tw=draw(st.integers(1, wo)), tc=draw(st.integers(1, 10)),
                seed=draw(st.integers(0, 2**32 - 1)), off=draw(PNN_OFFSETS), ncores=draw(NCORES))


@given(tiled_depthwise())
@settings(max_examples=60, deadline=None)
def test_tiled_depthwise_layer(pnn, L):
    """A whole padded depthwise layer, tile by tile (rows, columns and
    channels): equal to the golden layer."""
    rng = np.random.default_rng(L["seed"])
    c = L["c"]
    x = int8s(rng, (L["h"], L["w"], c))
    w = int8s(rng, (c, L["kh"], L["kw"]))
    kern, strd = (L["kh"], L["kw"]), (L["sh"], L["sw"])
    acc = ops.depthwise(x, w.transpose(1, 2, 0), None, L["off"], kern, strd, L["pad"])
    rq = full_requant(rng, c, acc)
    expected = ops.requantize(acc, rq.golden).astype(np.int8)
    got = np.zeros_like(expected)
    ncores = L["ncores"]
    for c0 in range(0, c, L["tc"]):
        c1 = min(c0 + L["tc"], c)
        for oy0 in range(0, L["ho"], L["th"]):
            oy1 = min(oy0 + L["th"], L["ho"])
            y0, y1, pt, pb = tile_input(oy0, oy1, L["sh"], L["kh"], L["pad"][0], L["h"])
            for ox0 in range(0, L["wo"], L["tw"]):
                ox1 = min(ox0 + L["tw"], L["wo"])
                x0, x1, pl, pr = tile_input(ox0, ox1, L["sw"], L["kw"], L["pad"][1], L["w"])
                g = dict(kh=L["kh"], kw=L["kw"], sh=L["sh"], sw=L["sw"], pad=(pt, pl, pb, pr))
                out = np.full((oy1 - oy0, ox1 - ox0, c1 - c0), 99, dtype=np.int8)
                sb = stripe_bytes(g, oy1 - oy0)
                scratch = np.zeros(sb * ncores, dtype=np.int8)
                build = conv_builder(x[y0:y1, x0:x1, c0:c1], w[c0:], None, out.shape, g, L["off"], rq, sb,
                                    first_channel=c0)
                args, keep = build(out.ctypes.data, ptr(scratch, c_int8))
                for k in range(ncores):
                    pnn.pnn_depthwise(ctypes.byref(args), k, ncores)
                got[oy0:oy1, ox0:ox1, c0:c1] = out
    np.testing.assert_array_equal(got, expected)
