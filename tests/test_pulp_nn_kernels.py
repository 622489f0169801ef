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

import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tessera.golden import ops
from helpers import PNN_FALLBACK
from test_ref_kernels import (CROSS as REF_CROSS, NCORES, OFFSETS, ONE, SETTINGS, Case, add_cases,
                              arrays, assert_compiles_cleanly, avgpool_cases, channel_tile, conv_builder,
                              conv_cases, depthwise_cases, draw_bias, draw_rq, finish, int8s, linear_cases,
                              load_kernels, maxpool_cases, pointwise_cases, run_case, run_tiled, share_pixels,
                              tiled_layers)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PNN_DIR = os.path.join(ROOT, "kernels", "pulp_nn")
SOURCES = sorted(os.path.join(PNN_DIR, f) for f in os.listdir(PNN_DIR) if f.endswith(".c"))

# offsets that take the four-byte dot-product path (0) and the uint8 one (128) often
PNN_OFFSETS = st.one_of(st.just(0), st.just(128), OFFSETS)


@pytest.fixture(scope="session")
def pnn(tmp_path_factory):
    return load_kernels(tmp_path_factory.mktemp("pnn") / "libtsr_pnn.so", SOURCES + PNN_FALLBACK, "pnn_")


CROSS = {name: REF_CROSS[name] for name in ("riscv64-unknown-elf-gcc (rv32imc)", "arm-none-eabi-gcc (cortex-m7)")}


@pytest.mark.parametrize("target", sorted(CROSS))
def test_kernels_compile_cleanly(target, tmp_path):
    assert_compiles_cleanly(CROSS[target], SOURCES, tmp_path)


# ---- the work split (kernels/pulp_nn/pnn_common.h) -------------------------

def chunk(n, quantum, core, ncores):
    """[begin, end) of pnn_chunk."""
    size = -(-n // ncores)
    size = -(-size // quantum) * quantum
    b = min(size * core, n)
    return b, min(b + size, n)


def split(pixels, channels, pq, cq, core, ncores):
    """This core's (pixels, channels) ranges under pnn_split (these tests
    build the portable path: a tie by pixels)."""
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


# ---- conv-like tiles: the reference kernels' cases (test_ref_kernels.py),
# with this library's names, work split, offsets and tile sizes -----------------

PNN = dict(prefix="pnn_")


@given(conv_cases(**PNN, share=share_pixels_or_channels(2, 4), max_in_c=8, max_out_c=13, offsets=PNN_OFFSETS))
@SETTINGS
def test_conv2d_matches_golden(pnn, case):
    run_case(pnn, *case)


def stripe_bytes(g, out_h):
    """Scratch one core's column stripe needs (pnn_depthwise)."""
    return ((out_h - 1) * g["sh"] + g["kh"]) * g["kw"]


def stripe_choices(g, out_h):
    """None, too little, exactly enough; the library.yaml terms give
    kw * in_h + 2 * kh * kw: at least enough."""
    need = stripe_bytes(g, out_h)
    return [0, need - 1, need, g["kw"] * g["in_h"] + 2 * g["kh"] * g["kw"]]


def depthwise_share(g):
    """pnn_depthwise splits channels; a 1x1 one (stride 1, no padding: a
    per-channel scale and bias) is elementwise and splits pixels."""
    plain = (g["kh"], g["kw"], g["sh"], g["sw"]) == (1, 1, 1, 1) and not any(g["pad"])
    return share_pixels if plain else share_channels(1)


depthwise_share.by_geometry = True


@given(depthwise_cases(**PNN, share=depthwise_share, max_c=19, offsets=PNN_OFFSETS, scratch=stripe_choices))
@SETTINGS
def test_depthwise_matches_golden(pnn, case):
    run_case(pnn, *case)


@given(depthwise_cases(**PNN, share=depthwise_share, max_c=19, offsets=PNN_OFFSETS, scratch=stripe_choices,
                       geometries=st.just(dict(kh=1, kw=1, sh=1, sw=1, pad=(0, 0, 0, 0)))))
@SETTINGS
def test_depthwise_1x1_matches_golden(pnn, case):
    """The elementwise path (transformers' Add of a constant, Mul by a scale)."""
    run_case(pnn, *case)


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
    run_case(pnn, *case)


@given(pointwise_cases(**PNN, share=share_pixels_or_channels(2, 4), max_h=9,
                       in_cs=st.sampled_from([1, 3, 4, 8, 12, 17]), max_out_c=21, offsets=PNN_OFFSETS))
@SETTINGS
def test_pointwise_matches_golden(pnn, case):
    run_case(pnn, *case)


@given(linear_cases(**PNN, share=share_channels(4), in_cs=st.sampled_from([1, 4, 5, 16]), max_out_c=40,
                    offsets=PNN_OFFSETS))
@SETTINGS
def test_linear_matches_golden(pnn, case):
    run_case(pnn, *case)


# ---- pools and add ---------------------------------------------------------

@given(maxpool_cases(**PNN, share=share_pixels_or_channels(1, 4), max_c=12))
@SETTINGS
def test_maxpool_matches_golden(pnn, case):
    run_case(pnn, *case)


@given(avgpool_cases(**PNN, share=share_pixels_or_channels(1, 4), max_c=12))
@SETTINGS
def test_avgpool_matches_golden(pnn, case):
    run_case(pnn, *case)


# the reference's adds less their "wild" kind (any in_mul, then a requantization)
@given(add_cases(**PNN, share=share_flat, kinds=("frontend", "int32")))
@SETTINGS
def test_add_matches_golden(pnn, case):
    run_case(pnn, *case)


# ---- fixed cases -------------------------------------------------------------

@pytest.mark.parametrize("op", ["conv2d", "depthwise", "pointwise", "linear"])
@pytest.mark.parametrize("ncores", [1, 8])
def test_channel_tile_of_larger_weights(pnn, op, ncores):
    """A channel tile: weights, bias and requant arrays point into the
    layer's arrays at the tile's first channel."""
    rng = np.random.default_rng(11)
    c0, off = 8, 128
    g = dict(ONE) if op == "pointwise" else dict(kh=3, kw=3, sh=1, sw=2, pad=(1, 1, 1, 0))
    x, w, bias, rq, _, expected = channel_tile(rng, op, g, (9, 6, 8), 37, c0, 20, off)
    if op == "depthwise":
        sb = stripe_bytes(g, expected.shape[0])
        share = share_channels(1)
    else:
        sb = 2 * 3 * 3 * 8 if op == "conv2d" else 0
        share = share_channels(4) if op == "linear" else share_pixels_or_channels(2, 4)
    build = conv_builder(x, w, bias, expected.shape, g, off, rq, sb, first_channel=c0)
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


@given(tiled_layers(max_c=10, channel_tiles=True, offsets=PNN_OFFSETS))
@settings(max_examples=60, deadline=None)
def test_tiled_depthwise_layer(pnn, L):
    """A whole padded depthwise layer, tile by tile (rows, columns and
    channels): equal to the golden layer."""
    run_tiled(pnn, "depthwise", L, prefix="pnn_", scratch_bytes=stripe_bytes)


# ---- the depthwise's requantization without mulh (pulp_nn.dw_split) --------

def _wrap32(v):
    return (v + 2**31) % 2**32 - 2**31


def _split_rq(acc, mul, shift, zp, split):
    """kernels/pulp_nn/depthwise.c's DW_SPLIT1, p.addRN and p.clipi in 32-bit
    arithmetic (int64 arrays, every result wrapped as the core's registers)."""
    cut, t0 = split & 255, split >> 8
    mh, sh2 = mul >> cut, shift - cut
    ml = (mul - (mh << cut)) >> t0
    low = _wrap32(acc * ml)
    t = _wrap32((low >> (cut - t0)) + _wrap32(acc * mh))
    y = _wrap32(t + _wrap32(zp << sh2) + (1 << (sh2 - 1))) >> sh2
    return np.clip(y, -128, 127)


def _dw_layer(seed, channels, bias_bits):
    rng = np.random.default_rng(seed)
    w = rng.integers(-128, 128, size=(channels, 9))
    bias = rng.integers(-2**bias_bits, 2**bias_bits, size=channels)
    mul = rng.integers(2**23, 2**24, size=channels) << 7      # float32 scales' multipliers
    shift = rng.integers(36, 44, size=channels)
    return w, bias, mul, shift


@pytest.mark.parametrize("seed", range(6))
def test_dw_split_is_exact_for_every_reachable_accumulator(seed):
    """Every accumulator a channel can reach (inputs any int8, offset 128)
    requantizes as the golden model's round half up; a cut dw_split refuses
    (the one below its choice) is wrong for some of them."""
    from tessera.codegen.libraries import pulp_nn
    from tessera.ir import Requant

    w, bias, mul, shift = _dw_layer(seed, 4, 14 + seed)
    zp, off = -128, 128
    split = pulp_nn.dw_split(w, bias, off, mul, shift, zp)
    assert split, "float32 scales with 18-bit accumulators take the split"
    base = bias + off * w.sum(axis=1)
    lo = base + np.where(w > 0, -128 * w, 127 * w).sum(axis=1)
    hi = base + np.where(w > 0, 127 * w, -128 * w).sum(axis=1)
    wrong = 0
    for c in range(len(w)):
        acc = np.arange(lo[c], hi[c] + 1, dtype=np.int64)
        rq = Requant(mul=[int(mul[c])], add=[0], shift=[int(shift[c])], rounding="half_up", zero_point=zp,
                     lo=-128, hi=127)
        golden = ops.requantize(acc.reshape(-1, 1), rq).reshape(-1)
        np.testing.assert_array_equal(_split_rq(acc, int(mul[c]), int(shift[c]), zp, split), golden)
        below = split - 1
        if below & 255 > below >> 8:
            wrong += int((_split_rq(acc, int(mul[c]), int(shift[c]), zp, below) != golden).any())
    assert wrong, "the cut below dw_split's choice breaks some channel (the bound is tight)"


def test_dw_split_refuses_what_does_not_fit():
    """0 (keep mulh) when one channel's accumulators are too wide, a
    multiplier has no zero low bits to spare or a shift is under 33."""
    from tessera.codegen.libraries import pulp_nn

    w, bias, mul, shift = _dw_layer(7, 8, 14)
    assert pulp_nn.dw_split(w, bias, 128, mul, shift, -128)
    wide = bias.copy()
    wide[5] = 2**27
    assert pulp_nn.dw_split(w, wide, 128, mul, shift, -128) == 0
    odd = mul.copy()
    odd[2] |= 1
    assert pulp_nn.dw_split(w, bias, 128, odd, shift, -128) == 0
    low = shift.copy()
    low[0] = 32
    assert pulp_nn.dw_split(w, bias, 128, mul, low, -128) == 0
