"""The PULP-NN-style kernels' Xpulpv2 path (kernels/pulp_nn/, built with
TSR_ISA_XPULPV2 as targets/pulp_open.yaml asks) on GVSoC's pulp-open
cluster, against the golden model bit for bit.

One firmware holds a fixed list of kernel calls (seeded data, chosen to
reach every branch of the Xpulp code and its fallbacks): each op with
channels that are and are not multiples of 4, odd pixel counts, padding on
every border, stride 2, the input offsets the SIMD loops take (0, 128) and
others (folded into the bias), K not a multiple of 4 (a scalar tail, rows
off word alignment), the 32-bit requantization and the general
one (shift below 33, floor rounding with an additive term), int32 outputs.
Every call copies its operands into L1 (as the generated layers' DMA
does), runs on 8 cores (hal_fork) or 1, and prints its output; one GVSoC
run checks all of them. The same firmware built without the ISA extension
(the portable path) must print the same bytes.

Needs GVSoC (PATH, or the prebuilt copy beside the checkout) and
riscv64-unknown-elf-gcc with picolibc; skips otherwise.
"""

import os
import re

import numpy as np
import pytest

from helpers import PNN_FALLBACK, ROOT
from tessera.codegen.libraries import pulp_nn
from tessera.golden import ops
from test_gvsoc import GVSOC_MARKS, _target, build_firmware
from test_ref_kernels import ONE, ROUNDING_C, Rq, int8s

pytestmark = GVSOC_MARKS

PNN = os.path.join(ROOT, "kernels", "pulp_nn")
def requant(rng, kind, channels, acc):
    """`std`: per-channel, round half up, Q31 multipliers with shifts of 33
    or more (the 32-bit path), clamped at the zero point (a ReLU); `net`:
    the same with zero point -128 and the whole int8 range (the bundled
    networks' layers: ReLU in the zero point); `low`: shifts below 33;
    `floor`: floor rounding with an additive term (NEMO's); `leaky`:
    `net` with its own multiplier and shift for a negative accumulator (a
    LeakyRelu folded into the layer: the general requantization); `f32`:
    `net` with float32 scales' multipliers (24 significant bits, the
    networks' own: the depthwise's requantization without mulh can take
    them, tsr_requant_t.split); None: int32 outputs."""
    if kind is None:
        return None
    top = int(np.abs(acc).max()) or 1
    if kind == "low":
        mul = rng.integers(1, 2**12, size=channels)
    elif kind == "f32":
        mul = rng.integers(2**23, 2**24, size=channels) << 7
        kind = "net"
    else:
        mul = rng.integers(2**30, 2**31 - 1, size=channels)
    shift = [max(1, min(62, (top * int(m)).bit_length() - 7)) for m in mul]
    if kind in ("std", "net"):
        shift = [max(33, s) for s in shift]
    zp = int(rng.integers(-128, 0))
    if kind == "net":
        return Rq(mul.tolist(), None, shift, 1, -128, -128, 127, "half_up")
    if kind == "leaky":
        # slope about 1/8: the negative side's multiplier, three more bits of shift
        return Rq(mul.tolist(), None, shift, 1, -20, -128, 127, "half_up", neg=(int(mul[0]), shift[0] + 3))
    if kind == "floor":
        return Rq(mul.tolist(), rng.integers(-2**20, 2**20, size=channels).tolist(), shift, 1, zp, -128, 127,
                  "floor")
    return Rq(mul.tolist(), None, shift, 1, zp, zp, 127, "half_up")


def case(op, seed, shape, off, rq_kind, ncores, geom=ONE, lean=False, ring=False, fold=False, chw=False,
         room=None, split_k=None, extreme=False):
    """(kernel, operands, expected output) of one call. A convolution or
    depthwise call gets the scratch library.yaml sizes (with the Xpulp
    paths' padded windows and records, or ring of kh rows and whole
    padded plane), with ring no room for the plane (the ring path), or
    with lean only what the portable path needs (the path the Xpulp build
    falls back to when its own does not fit). With fold, a pointwise or
    linear call comes as the code generator makes it for this library:
    the offset's share off * sum(w) in the bias, offset 0. With chw, a
    depthwise call gets its input channel-major (pnn_depthwise_chw), a
    pointwise call stores its output so (pnn_pointwise_chw);
    room overrides the scratch bytes per core; split_k overrides the
    build's tsr_requant_t.split (pulp_nn.dw_split); extreme puts the
    inputs at int8's ends and the weights of a channel at one sign."""
    rng = np.random.default_rng(seed)
    kern, strd, pad = (geom["kh"], geom["kw"]), (geom["sh"], geom["sw"]), geom["pad"]
    if op in ("maxpool", "avgpool"):
        h, w, c = shape
        x = int8s(rng, (h, w, c))
        if op == "maxpool":
            expected = ops.maxpool(x, kern, strd, pad).astype(np.int8)
        else:
            acc = ops.avgpool_sum(x, off, kern, strd)
            rq = requant(rng, rq_kind, c, acc)
            expected = ops.requantize(acc, rq.golden).astype(np.int8)
        return dict(op=op, x=x, w=np.zeros(1, np.int8), bias=np.zeros(1, np.int32), off=off,
                    rq=None if op == "maxpool" else rq, expected=expected, geom=geom, ncores=ncores, scratch=0)
    if op == "depthwise":
        h, w, c = shape
        x, wt = int8s(rng, (h, w, c)), int8s(rng, (c, *kern))
        bias = rng.integers(-2**14, 2**14, size=c).astype(np.int32)
        if extreme:   # channel j's weights all of one sign, its inputs at one end of int8
            sign = np.where(np.arange(c) % 2 == 0, 1, -1)
            wt = (np.abs(wt.astype(np.int32)).clip(1, 127) * sign.reshape(-1, 1, 1)).astype(np.int8)
            x = np.broadcast_to(np.where(np.arange(c) % 4 < 2, 127, -128), (h, w, c)).astype(np.int8)
        if rq_kind == "f32big":   # a bias no cut leaves room for
            bias = rng.integers(2**26, 2**27, size=c).astype(np.int32)
            rq_kind = "f32"
        acc = ops.depthwise(x, wt.transpose(1, 2, 0), bias, off, kern, strd, pad)
        out_c = c
    else:
        h, w, in_c, out_c = shape
        x = int8s(rng, (h, w, in_c))
        bias = rng.integers(-2**14, 2**14, size=out_c).astype(np.int32)
        if op == "conv2d":
            wt = int8s(rng, (out_c, *kern, in_c))
            acc = ops.conv2d(x, wt, bias, off, kern, strd, pad)
        elif op == "pointwise":
            wt = int8s(rng, (out_c, in_c))
            acc = ops.pointwise(x, wt, bias, off)
        else:
            wt = int8s(rng, (out_c, x.size))
            acc = ops.linear(x, wt, bias, off)
    rq = requant(rng, rq_kind, out_c, acc)
    expected = acc.astype(np.int32) if rq is None else ops.requantize(acc, rq.golden).astype(np.int8)
    if fold and op in ("pointwise", "linear"):
        bias = (bias + off * wt.reshape(out_c, -1).astype(np.int64).sum(axis=1)).astype(np.int32)
        off = 0
    rows = (acc.shape[0] - 1) * geom["sh"] + geom["kh"]
    if op == "conv2d":
        patch = geom["kh"] * geom["kw"] * shape[2]
        scratch = 2 * patch + (0 if lean else 20 + 18 * out_c + (out_c * (patch + 3) if patch <= 256 else 0))
    elif op == "depthwise":
        scratch = rows * geom["kw"] + (0 if lean else 2 * geom["kh"] * geom["kw"] + geom["kh"] * shape[1]
                                       + (0 if ring else shape[0] * shape[1]))
    else:
        scratch = 0
    out_shape = expected.shape
    # the 3x3 depthwise's requantization without mulh, where the build would allow it
    split = 0
    if op == "depthwise" and kern == (3, 3) and rq is not None and rq.add is None and not rq.neg \
            and rq.rounding == "half_up":
        split = pulp_nn.dw_split(wt, bias, off, rq.mul, rq.shift, rq.zero_point) if split_k is None else split_k
    if chw and op == "depthwise":
        x = np.ascontiguousarray(x.transpose(2, 0, 1))
    elif chw:
        expected = np.ascontiguousarray(expected.transpose(2, 0, 1))
    return dict(op=op, x=x, w=wt, bias=bias, off=off, rq=rq, expected=expected, geom=geom,
                ncores=ncores, scratch=scratch if room is None else room, chw=chw, out_shape=out_shape,
                split=split)


S1 = dict(kh=3, kw=3, sh=1, sw=1, pad=(1, 1, 1, 1))
S2 = dict(kh=3, kw=3, sh=2, sw=2, pad=(0, 0, 1, 1))
ODD = dict(kh=3, kw=3, sh=2, sw=1, pad=(1, 0, 2, 1))
K5 = dict(kh=5, kw=5, sh=1, sw=2, pad=(2, 2, 2, 1))

CASES = [
    # pointwise: the 4x2 SIMD block, leftover channels, an odd last pixel,
    # K not a multiple of 4 (portable), every offset kind, every requant kind
    case("pointwise", 1, (3, 5, 16, 12), 128, "std", 8),
    case("pointwise", 2, (2, 3, 8, 7), 128, "std", 8),
    case("pointwise", 3, (1, 3, 12, 6), 0, "std", 8),
    case("pointwise", 4, (3, 3, 32, 9), 128, "std", 1),
    case("pointwise", 5, (2, 2, 6, 8), 128, "std", 8),
    case("pointwise", 6, (2, 4, 8, 8), 62, "std", 8),
    case("pointwise", 7, (2, 4, 8, 8), -128, "std", 3),
    case("pointwise", 8, (3, 3, 16, 8), 128, "low", 8),
    case("pointwise", 9, (3, 3, 16, 8), 128, "floor", 8),
    case("pointwise", 10, (3, 3, 16, 8), 128, None, 8),
    case("pointwise", 11, (2, 3, 20, 13), 0, None, 1),
    # the networks' requantization (p.clipi), the offset folded as the code
    # generator folds it, output rows off word alignment (6 channels), an
    # odd pixel on a core
    case("pointwise", 12, (3, 5, 16, 12), 128, "net", 8, fold=True),
    case("pointwise", 13, (2, 4, 8, 8), 128, "net", 3, fold=True),
    case("pointwise", 14, (3, 3, 16, 6), 128, "net", 8, fold=True),
    case("pointwise", 15, (3, 3, 12, 8), 128, "net", 8),
    # a LeakyRelu folded (a negative accumulator's own multiplier): the
    # general requantization on every op's Xpulp entry
    case("pointwise", 16, (3, 5, 16, 12), 128, "leaky", 8, fold=True),
    case("conv2d", 17, (6, 7, 4, 8), 128, "leaky", 8, S1),
    case("depthwise", 18, (8, 8, 8), 128, "leaky", 8, S1),
    case("linear", 19, (1, 1, 64, 24), 128, "leaky", 8, fold=True),
    # conv2d through im2col: padding, stride 2, patches of 36 and 27 bytes
    case("conv2d", 20, (6, 7, 4, 8), 128, "std", 8, S1),
    case("conv2d", 21, (7, 7, 4, 6), 128, "std", 8, S2),
    case("conv2d", 22, (5, 6, 3, 5), -2, "std", 8, S2),
    case("conv2d", 23, (6, 5, 8, 9), 0, "low", 1, ODD),
    case("conv2d", 24, (5, 5, 4, 4), 128, None, 8, ODD),
    case("conv2d", 25, (6, 6, 3, 8), 5, "std", 8, S1),
    # the Xpulp path: the first layer's shape (3 channels, stride 2, an
    # offset folded), an odd pixel count on one core, channels split over
    # cores, the portable path when its scratch is all there is
    case("conv2d", 26, (9, 13, 3, 8), -2, "std", 8, S2),
    case("conv2d", 27, (5, 5, 3, 12), 128, "std", 1, ODD),
    case("conv2d", 28, (3, 3, 5, 32), 0, "std", 8, S1),
    case("conv2d", 29, (6, 7, 4, 8), 128, "std", 8, S1, lean=True),
    # one input channel (DORY's and Deeploy's first layers), a long patch
    case("conv2d", 50, (10, 10, 1, 16), 0, "std", 8, S1),
    case("conv2d", 51, (4, 4, 64, 32), 0, "std", 8, S1),
    # depthwise: 3x3 (SIMD windows), stride 2, odd borders, 5x5 (general)
    case("depthwise", 30, (8, 9, 8), 128, "std", 8, S1),
    case("depthwise", 31, (9, 7, 5), 128, "std", 8, S2),
    case("depthwise", 32, (7, 6, 11), -1, "std", 3, ODD),
    case("depthwise", 33, (6, 6, 4), 0, "low", 8, S1),
    case("depthwise", 34, (6, 6, 6), 128, "floor", 8, S1),
    case("depthwise", 35, (6, 6, 6), 128, None, 1, S1),
    case("depthwise", 36, (8, 8, 5), 128, "std", 8, K5),
    # the Xpulp ring: stride 2 with padding on the left only, a stride of
    # 3, a one-column tile, the stripe path when the ring does not fit
    case("depthwise", 37, (9, 10, 7), 3, "std", 8, dict(kh=3, kw=3, sh=2, sw=2, pad=(0, 1, 1, 0))),
    case("depthwise", 38, (10, 11, 9), 128, "std", 5, dict(kh=3, kw=3, sh=3, sw=3, pad=(1, 1, 1, 1))),
    case("depthwise", 39, (5, 1, 12), 0, "std", 8, dict(kh=3, kw=3, sh=1, sw=1, pad=(1, 1, 1, 1))),
    # the plane's loops with the networks' requantization: pairs of
    # outputs (stride 1, even width), an odd width (one output a turn, the
    # rows' last byte gathered apart), stride 2 (pairs of rows, words
    # gathered on aligned rows with 2 or 3 bytes left in a row; an odd row
    # count leaves a last row)
    case("depthwise", 60, (8, 8, 8), 128, "net", 8, S1),
    case("depthwise", 61, (7, 9, 5), 128, "net", 8, S1),
    case("depthwise", 62, (9, 10, 7), 128, "net", 3, S2),
    case("depthwise", 63, (11, 7, 6), 128, "net", 8, S2),
    # an odd stride-1 width without left padding (a tile inside the map:
    # aligned rows, one byte left per row; pairs and a last output per row),
    # stride 2 with one byte left per row
    case("depthwise", 64, (9, 9, 6), 128, "net", 8, dict(kh=3, kw=3, sh=1, sw=1, pad=(1, 0, 1, 0))),
    case("depthwise", 65, (8, 9, 8), 128, "net", 8, S2),
    case("depthwise", 66, (9, 8, 6), 128, "net", 8, S2),
    # each plane loop with and without aligned rows: an even stride-1 width
    # without left padding, stride 2 with it
    case("depthwise", 67, (8, 10, 6), 128, "net", 8, dict(kh=3, kw=3, sh=1, sw=1, pad=(1, 0, 1, 0))),
    case("depthwise", 68, (9, 9, 6), 128, "net", 8, dict(kh=3, kw=3, sh=2, sw=2, pad=(1, 1, 1, 1))),
    case("depthwise", 45, (8, 9, 8), 128, "std", 8, S1, lean=True),
    case("depthwise", 46, (8, 9, 8), 128, "std", 8, S1, ring=True),
    case("depthwise", 47, (9, 10, 7), 3, "std", 8, dict(kh=3, kw=3, sh=2, sw=2, pad=(0, 1, 1, 0)), ring=True),
    # linear: channels split in fours, leftovers, K not a multiple of 4
    case("linear", 40, (1, 1, 64, 21), 128, "std", 8),
    case("linear", 41, (2, 2, 8, 13), 0, "std", 8),
    case("linear", 42, (1, 1, 30, 10), 128, "std", 8),
    case("linear", 43, (1, 1, 48, 12), 128, None, 1),
    case("linear", 44, (1, 1, 30, 9), -3, "std", 8),
    # the asm blocks: groups of four blocks and a rest, p.clipi and the
    # layer's own clamp, the offset folded or not
    case("linear", 45, (1, 1, 64, 88), 128, "net", 3, fold=True),
    case("linear", 46, (2, 2, 16, 24), 128, "std", 8),
    # pooling: four channels a word (odd channel counts take the bytes),
    # max pooling's padding, average pooling's requantization (p.clipi
    # and the layer's own clamp), a global pool (channels split)
    case("maxpool", 70, (7, 9, 12), 0, None, 8, dict(kh=3, kw=3, sh=2, sw=2, pad=(1, 1, 1, 1))),
    case("maxpool", 71, (6, 6, 5), 0, None, 3, dict(kh=2, kw=2, sh=2, sw=2, pad=(0, 0, 0, 0))),
    case("avgpool", 72, (4, 4, 64), 128, "net", 8, dict(kh=4, kw=4, sh=1, sw=1, pad=(0, 0, 0, 0))),
    case("avgpool", 73, (6, 7, 8), 3, "std", 8, dict(kh=3, kw=2, sh=3, sw=2, pad=(0, 0, 0, 0))),
    case("avgpool", 74, (5, 5, 6), 128, "net", 3, dict(kh=2, kw=2, sh=1, sw=1, pad=(0, 0, 0, 0))),
    # depthwise on a channel-major input (pnn_depthwise_chw): each plane
    # loop with rows copied in words (widths below, at and above 8, the
    # tile's last channel gathered by bytes), aligned rows, the general
    # requantization, a 5x5 window, one column, three cores, the ring, the
    # stripes, the direct loop, a plane with no room for the rows' last 8
    # bytes (gathered by bytes), a 1x1
    case("depthwise", 130, (8, 8, 8), 128, "net", 8, S1, chw=True),
    case("depthwise", 131, (7, 9, 5), 128, "net", 8, S1, chw=True),
    case("depthwise", 132, (9, 10, 7), 128, "net", 3, S2, chw=True),
    case("depthwise", 133, (11, 7, 6), 128, "net", 8, S2, chw=True),
    case("depthwise", 134, (9, 9, 6), 128, "net", 8, dict(kh=3, kw=3, sh=1, sw=1, pad=(1, 0, 1, 0)), chw=True),
    case("depthwise", 135, (8, 10, 6), 128, "net", 8, dict(kh=3, kw=3, sh=1, sw=1, pad=(1, 0, 1, 0)), chw=True),
    case("depthwise", 136, (9, 9, 6), 128, "net", 8, dict(kh=3, kw=3, sh=2, sw=2, pad=(1, 1, 1, 1)), chw=True),
    case("depthwise", 137, (6, 17, 9), 128, "net", 8, S1, chw=True),
    case("depthwise", 138, (5, 3, 16), 128, "net", 8, S1, chw=True),
    case("depthwise", 139, (8, 9, 8), 128, "std", 8, S1, chw=True),
    case("depthwise", 140, (7, 6, 11), -1, "std", 3, ODD, chw=True),
    case("depthwise", 141, (8, 8, 8), 128, "leaky", 8, S1, chw=True),
    case("depthwise", 142, (8, 8, 5), 128, "std", 8, K5, chw=True),
    case("depthwise", 143, (5, 1, 12), 0, "std", 8, S1, chw=True),
    case("depthwise", 144, (8, 9, 8), 128, "std", 8, S1, ring=True, chw=True),
    case("depthwise", 145, (8, 9, 8), 128, "std", 8, S1, lean=True, chw=True),
    case("depthwise", 146, (8, 9, 8), 128, "std", 8, S1, chw=True, room=0),
    case("depthwise", 147, (6, 6, 8), 128, "net", 8, dict(kh=3, kw=3, sh=1, sw=1, pad=(1, 1, 0, 0)), chw=True,
         room=7 * 7 + 4),
    case("depthwise", 148, (3, 5, 7), 128, "std", 8, dict(kh=1, kw=1, sh=1, sw=1, pad=(0, 0, 0, 0)), chw=True),
    # rows of 4 (two a turn, an odd last row), 8 (one loop) and 8k bytes
    # (double words, no padding restored), aligned or not
    case("depthwise", 149, (5, 4, 8), 128, "net", 8, S1, chw=True),
    case("depthwise", 150, (4, 4, 16), 128, "net", 8, S1, chw=True),
    case("depthwise", 151, (9, 8, 8), 128, "net", 8, S2, chw=True),
    case("depthwise", 152, (6, 16, 8), 128, "net", 8, S1, chw=True),
    case("depthwise", 153, (7, 24, 6), 128, "net", 8, dict(S2, pad=(0, 0, 0, 1)), chw=True),
    case("depthwise", 154, (5, 8, 9), 128, "net", 8, dict(kh=3, kw=3, sh=1, sw=1, pad=(1, 0, 1, 0)), chw=True),
    # the plane loops without mulh (tsr_requant_t.split: float32 scales'
    # multipliers), HWC and channel-major: pairs, an odd width's last
    # output, stride 2's row pairs and last row, aligned rows or not; the
    # same with inputs at the int8 ends (every window's accumulator at its
    # channel's bound: weights of one sign per channel), and a layer whose
    # accumulators leave no cut (split 0: one output a turn, with mulh)
    case("depthwise", 170, (8, 8, 8), 128, "f32", 8, S1),
    case("depthwise", 171, (7, 9, 5), 128, "f32", 8, S1),
    case("depthwise", 172, (9, 10, 7), 128, "f32", 3, S2),
    case("depthwise", 173, (11, 7, 6), 128, "f32", 8, S2),
    case("depthwise", 174, (9, 9, 6), 128, "f32", 8, dict(kh=3, kw=3, sh=1, sw=1, pad=(1, 0, 1, 0))),
    case("depthwise", 175, (8, 10, 6), 128, "f32", 8, dict(kh=3, kw=3, sh=1, sw=1, pad=(1, 0, 1, 0))),
    case("depthwise", 176, (9, 9, 6), 128, "f32", 8, dict(kh=3, kw=3, sh=2, sw=2, pad=(1, 1, 1, 1))),
    case("depthwise", 177, (8, 8, 8), 128, "f32", 8, S1, chw=True),
    case("depthwise", 178, (7, 9, 5), 128, "f32", 8, S1, chw=True),
    case("depthwise", 179, (9, 10, 7), 128, "f32", 3, S2, chw=True),
    case("depthwise", 180, (6, 17, 9), 128, "f32", 8, S1, chw=True),
    case("depthwise", 181, (8, 8, 8), 128, "f32", 8, S1, extreme=True),
    case("depthwise", 182, (9, 10, 7), 128, "f32", 8, S2, extreme=True),
    case("depthwise", 183, (7, 9, 8), 128, "f32", 8, S1, extreme=True, chw=True),
    case("depthwise", 184, (8, 8, 8), 128, "f32big", 8, S1),
    # stride 1's 2x2 blocks (planes of 64 outputs or more): an odd row
    # count (a last row of pairs), one row and small planes (no block),
    # HWC and channel-major, extreme inputs
    case("depthwise", 185, (7, 8, 6), 128, "f32", 8, S1),
    case("depthwise", 186, (1, 10, 6), 128, "f32", 8, S1),
    case("depthwise", 187, (5, 6, 9), 128, "f32", 8, S1, chw=True),
    case("depthwise", 188, (3, 4, 8), 128, "f32", 8, S1, extreme=True),
    case("depthwise", 189, (9, 8, 6), 128, "f32", 8, S1),
    case("depthwise", 190, (11, 8, 5), 128, "f32", 8, S1, chw=True),
    case("depthwise", 191, (9, 12, 8), 128, "f32", 8, S1, extreme=True),
    # stride 2 on a channel-major input: word-aligned plane rows (rows of 4,
    # 8, 16 and odd widths, the tile's last channel gathered), and with
    # room only for the unaligned plane
    case("depthwise", 192, (5, 4, 8), 128, "f32", 8, S2, chw=True),
    case("depthwise", 193, (6, 16, 8), 128, "f32", 8, S2, extreme=True, chw=True),
    case("depthwise", 194, (7, 13, 5), 128, "f32", 8, dict(S2, pad=(0, 0, 0, 1)), chw=True),
    case("depthwise", 195, (8, 8, 8), 128, "f32", 8, S2, chw=True),
    case("depthwise", 196, (9, 10, 7), 128, "f32", 8, S2, chw=True, room=10 * 11 + 4),
    # ... and padded on the left (networks' stride-2 tiles): the plane one
    # byte before a word, windows read from the byte before them; an odd
    # last row, one output row (one output a turn), the general clamp
    case("depthwise", 197, (5, 64, 8), 128, "f32", 8, dict(S2, pad=(0, 1, 0, 0)), chw=True),
    case("depthwise", 198, (7, 17, 6), 128, "f32", 8, dict(S2, pad=(1, 1, 0, 0)), chw=True),
    case("depthwise", 199, (7, 17, 6), 128, "f32", 8, dict(S2, pad=(1, 1, 0, 0)), extreme=True),
    case("depthwise", 200, (6, 16, 5), 128, "std", 8, dict(S2, pad=(1, 1, 0, 0))),
    case("depthwise", 201, (3, 20, 8), 128, "net", 8, dict(S2, pad=(1, 1, 1, 1)), chw=True),
    case("depthwise", 202, (1, 16, 8), 128, "f32", 8, dict(S2, pad=(1, 1, 1, 1)), chw=True),
    case("depthwise", 203, (8, 16, 8), 128, "leaky", 8, dict(S2, pad=(1, 1, 0, 0)), chw=True),
    # pointwise storing channel-major (pnn_pointwise_chw): split by pixels
    # and by channels, an odd pixel count, leftover channels, the layer's
    # own clamp, the general requantization, int32 outputs, an offset not
    # folded, K not a multiple of 4
    case("pointwise", 160, (3, 5, 16, 12), 128, "net", 8, fold=True, chw=True),
    case("pointwise", 161, (8, 8, 32, 16), 128, "net", 8, fold=True, chw=True),
    case("pointwise", 162, (3, 3, 16, 14), 128, "net", 3, fold=True, chw=True),
    case("pointwise", 163, (3, 5, 16, 12), 128, "std", 8, chw=True),
    case("pointwise", 164, (3, 5, 16, 12), 128, "leaky", 8, fold=True, chw=True),
    case("pointwise", 165, (2, 3, 8, 8), 128, None, 8, chw=True),
    case("pointwise", 166, (2, 4, 8, 8), 62, "std", 8, chw=True),
    case("pointwise", 167, (2, 3, 6, 8), 128, "net", 8, fold=True, chw=True),
    case("pointwise", 168, (2, 2, 64, 64), 128, "net", 8, fold=True, chw=True),
    # stride 1 on a channel-major input with the split, the whole channel
    # loop in asm (plane_s1_lean): rows of 8 in 2x2 blocks, several channels
    # a core (the record's pointers walked), an uneven split over 3 cores,
    # a banded tile (no top or bottom padding), an odd row count and two
    # rows (pairs), no side padding, an odd row count of 64 outputs or
    # more (2x2 blocks, the last row in pairs); rows of 4 in pairs, two rows
    # a copy; and the shapes it leaves to plane_body: rows of 4 in an odd
    # count, no cut (split 0)
    case("depthwise", 204, (8, 8, 16), 128, "f32", 8, S1, chw=True),
    case("depthwise", 205, (6, 8, 9), 128, "f32", 3, S1, extreme=True, chw=True),
    case("depthwise", 206, (10, 8, 8), 128, "f32", 8, dict(S1, pad=(0, 1, 0, 1)), chw=True),
    case("depthwise", 207, (7, 8, 8), 128, "f32", 8, S1, chw=True),
    case("depthwise", 208, (2, 8, 8), 128, "f32", 8, S1, chw=True),
    case("depthwise", 209, (4, 8, 8), 128, "f32", 8, dict(S1, pad=(1, 0, 1, 0)), chw=True),
    case("depthwise", 210, (4, 4, 16), 128, "f32", 8, S1, chw=True),
    case("depthwise", 211, (6, 4, 16), 128, "f32", 8, S1, extreme=True, chw=True),
    case("depthwise", 213, (5, 4, 8), 128, "f32", 8, S1, chw=True),
    case("depthwise", 214, (4, 4, 8), 128, "f32big", 8, S1, chw=True),
    # ... rows of 8n bytes (two loops a copy): 2x2 blocks, the last row of an
    # odd count in pairs (as in mbv1_128's dw3 tiles, 7x32 outputs), small
    # planes; pairs only on one output row (of 64; of 8, two channels a core)
    case("depthwise", 215, (4, 16, 8), 128, "f32", 8, S1, chw=True),
    case("depthwise", 216, (4, 32, 8), 128, "f32", 8, dict(S1, pad=(1, 1, 0, 1)), chw=True),
    case("depthwise", 217, (5, 24, 8), 128, "f32", 8, S1, extreme=True, chw=True),
    case("depthwise", 218, (3, 16, 8), 128, "f32", 8, S1, chw=True),
    case("depthwise", 219, (1, 64, 8), 128, "f32", 8, S1, chw=True),
    case("depthwise", 220, (1, 64, 8), 128, "f32", 8, S1),   # HWC: plane_body's 2x2 blocks need two rows
    case("depthwise", 221, (1, 8, 16), 128, "f32", 8, S1, chw=True),
    # stride 2 on aligned words only (DW_S2WORDS: left padding, the split,
    # an even output width): an odd row count, an odd input width, rows of
    # 20 and 24 bytes, right padding, one output row (with and without the
    # split), inputs at int8's ends, three cores, HWC and channel-major
    case("depthwise", 222, (7, 32, 5), 128, "f32", 8, dict(S2, pad=(1, 1, 0, 0))),
    case("depthwise", 223, (6, 20, 6), 128, "f32", 3, dict(S2, pad=(1, 1, 0, 1)), chw=True),
    case("depthwise", 224, (2, 24, 8), 128, "f32", 8, dict(S2, pad=(1, 1, 0, 0)), extreme=True),
    case("depthwise", 225, (1, 16, 8), 128, "f32big", 8, dict(S2, pad=(1, 1, 1, 1)), chw=True),
    case("depthwise", 226, (5, 64, 8), 128, "f32", 8, dict(S2, pad=(0, 1, 0, 0)), extreme=True, chw=True),
    case("depthwise", 227, (9, 17, 7), -3, "f32", 8, dict(S2, pad=(1, 1, 1, 0))),
    # ... read in place from a channel-major tile (plane_s2_direct): a
    # padding row above (the first output row from the scratch) with one
    # output row, rows of 8 and 32, inputs at int8's ends on three cores,
    # no padding row, a padding value of 3; refused where the last window
    # reads the bottom padding, and without the split
    case("depthwise", 228, (3, 16, 4), 128, "f32", 8, dict(S2, pad=(1, 1, 0, 0)), chw=True),
    case("depthwise", 229, (9, 32, 3), 128, "f32", 3, dict(S2, pad=(1, 1, 0, 0)), extreme=True, chw=True),
    case("depthwise", 230, (8, 8, 8), 128, "f32", 8, dict(S2, pad=(1, 1, 0, 0)), chw=True),
    case("depthwise", 231, (6, 32, 4), 128, "f32", 8, dict(S2, pad=(0, 1, 0, 0)), chw=True),
    case("depthwise", 232, (7, 16, 3), -3, "f32", 8, dict(S2, pad=(0, 1, 0, 0)), chw=True),
    case("depthwise", 233, (5, 16, 4), 128, "f32", 8, dict(S2, pad=(1, 1, 1, 0)), chw=True),
    case("depthwise", 234, (5, 16, 4), 128, "f32big", 8, dict(S2, pad=(0, 1, 0, 0)), chw=True),
    # convolution storing channel-major (pnn_conv2d_chw): the first layer's
    # shape (p.clipi and the layer's own clamp), odd output widths (a row's
    # last single pixel: the pair before it again), a one-pixel-wide output
    # (the direct loop per row), padding on the left (border pairs), three
    # cores, channels split over the cores, and the direct loop for
    # channels not a multiple of 4, the general requantization and no
    # room for the Xpulp path
    case("conv2d", 235, (9, 13, 3, 8), -2, "net", 8, S2, chw=True),
    case("conv2d", 236, (8, 15, 3, 12), 128, "net", 3, S1, chw=True),
    case("conv2d", 237, (9, 13, 3, 8), 5, "std", 8, ODD, chw=True),
    case("conv2d", 238, (5, 1, 3, 8), 0, "std", 8, S1, chw=True),
    case("conv2d", 239, (10, 9, 3, 16), -2, "std", 8, dict(S2, pad=(1, 1, 1, 1)), chw=True),
    case("conv2d", 240, (3, 3, 5, 32), 0, "std", 8, S1, chw=True),
    case("conv2d", 241, (7, 7, 4, 6), 128, "std", 8, S2, chw=True),
    case("conv2d", 242, (6, 7, 4, 8), 128, "leaky", 8, S1, chw=True),
    case("conv2d", 243, (6, 7, 4, 8), 128, "std", 8, S1, lean=True, chw=True),
    # stride 2's seeded split (DW_S2PAIRS with the products seeded): row
    # pairs with an odd last row, inputs at int8's ends, three cores
    case("depthwise", 244, (11, 12, 6), 128, "f32", 3, S2, extreme=True),
]


def c_array(name, ctype, values):
    vals = ", ".join(str(int(v)) for v in np.asarray(values).ravel()) or "0"
    return f"static const {ctype} {name}[] __attribute__((aligned(4))) = {{{vals}}};\n"


# perf: core 0's counters (PULP's PCER 0xCC0 / PCMR 0xCC1; PCCR 0x780 +
# event: 0 cycles, 1 instructions, 2 load stalls, 4 cycles waiting for
# instruction fetches, 16 cycles lost to TCDM contention)
L1 = ' __attribute__((section(".bss.tsr.L1")))'
PERF_DECL = f"""static tsr_requant_t rq_l1{L1};
static int32_t bias_l1[1024]{L1};
static int32_t mul_l1[1024]{L1};
static int8_t shift_l1[1024]{L1};
static volatile uint32_t perf[5];
"""
PERF_START = """    if (k == 0) {
        __asm__ volatile("csrw 0xCC0, %0\\n\\tcsrw 0xCC1, %1" :: "r"(0x1FFFF), "r"(1));
        __asm__ volatile("csrw 0x780, x0\\n\\tcsrw 0x781, x0\\n\\tcsrw 0x782, x0\\n\\tcsrw 0x784, x0\\n\\t"
                         "csrw 0x790, x0");
    }
"""
PERF_STOP = """    if (k == 0) {
        __asm__ volatile("csrr %0, 0x780" : "=r"(perf[0]));
        __asm__ volatile("csrr %0, 0x781" : "=r"(perf[1]));
        __asm__ volatile("csrr %0, 0x782" : "=r"(perf[2]));
        __asm__ volatile("csrr %0, 0x784" : "=r"(perf[3]));
        __asm__ volatile("csrr %0, 0x790" : "=r"(perf[4]));
    }
"""
PERF_ARGS = """
        memcpy(bias_l1, c->bias, 4 * (uint32_t)c->out_c);
        args.bias = bias_l1;
        if (c->rq) {
            rq_l1 = *c->rq;
            memcpy(mul_l1, c->rq->mul, 4 * (uint32_t)c->out_c);
            memcpy(shift_l1, c->rq->shift, (uint32_t)c->out_c);
            rq_l1.mul = mul_l1;
            rq_l1.shift = shift_l1;
            args.rq = &rq_l1;
        }"""
PERF_FORK = """{
            uint64_t t0 = hal_counter();
            hal_fork(body, 0);
            printf("PERF %u %u %u %u %u %u\\n", (unsigned)i, (unsigned)(hal_counter() - t0), (unsigned)perf[1],
                   (unsigned)perf[2], (unsigned)perf[3], (unsigned)perf[4]);
        }"""


MAIN_HEAD = """static uint32_t up4(uint32_t n)
{
    return (n + 3u) & ~3u;
}

int main(int argc, char **argv)
{
    uint32_t i;
    int32_t j;
    (void)argc;
    (void)argv;
    hal_init();
"""   # the firmwares' main up to their loop over the cases (up4: offsets in the L1 arena)


def firmware_source(cases, perf=False):
    """The test program: every case's operands, then main(). With perf
    (benchmarks/pulp_nn_kernels.py) the call's arguments, bias and
    requantization arrays sit in L1 as a layer's do, and each call also
    prints its cycles and core 0's performance counters (PERF lines)."""
    out = ['#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n',
           '#include "tessera/hal.h"\n#include "tessera/pulp_nn.h"\n\n']
    table = []
    for i, c in enumerate(cases):
        g = c["geom"]
        out.append(c_array(f"x{i}", "int8_t", c["x"]))
        out.append(c_array(f"w{i}", "int8_t", c["w"]))
        out.append(c_array(f"b{i}", "int32_t", c["bias"]))
        rq = "0"
        if c["rq"] is not None:
            r = c["rq"]
            out.append(c_array(f"m{i}", "int32_t", r.mul))
            out.append(c_array(f"s{i}", "int8_t", r.shift))
            add = "0"
            if r.add is not None:
                out.append(c_array(f"a{i}", "int32_t", r.add))
                add = f"a{i}"
            neg = "0, 0"
            if r.neg:
                out.append(c_array(f"nm{i}", "int32_t", [r.neg[0]]))
                out.append(c_array(f"ns{i}", "int8_t", [r.neg[1]]))
                neg = f"nm{i}, ns{i}"
            out.append(f"static const tsr_requant_t rq{i} = {{m{i}, {add}, s{i}, 1, {r.zero_point}, {r.lo}, "
                       f"{r.hi}, {ROUNDING_C[r.rounding]}, {{0, 0, 0}}, {r.divisor}, {neg}, 0, {c.get('split', 0)}}};\n")
            rq = f"&rq{i}"
        e = c["expected"]
        shape = c.get("out_shape", e.shape)
        eh, ew, ec = shape if len(shape) == 3 else (1, 1, e.shape[-1])
        pt, pl, pb, pr = g["pad"]
        fn = f"0, pnn_{c['op']}" if c["op"].endswith("pool") else f"pnn_{c['op']}{'_chw' if c.get('chw') else ''}, 0"
        chw_in = c.get("chw") and c["op"] == "depthwise"
        xh, xw, xc = (c["x"].shape[1], c["x"].shape[2], c["x"].shape[0]) if chw_in else c["x"].shape
        table.append(f"    {{{fn}, x{i}, sizeof x{i}, w{i}, sizeof w{i}, b{i}, {rq}, "
                     f"{xh}, {xw}, {xc}, {eh}, {ew}, {ec}, "
                     f"{g['kh']}, {g['kw']}, {g['sh']}, {g['sw']}, {pt}, {pl}, {pb}, {pr}, {c['off']}, "
                     f"{c['scratch']}, {e.nbytes}, {c['ncores']}}},\n")
    out.append('''
typedef struct {
    void (*fn)(const tsr_conv_args_t *, int, int);
    void (*pool)(const tsr_pool_args_t *, int, int);   /* a pooling case: fn is 0 */
    const int8_t *x;
    uint32_t x_bytes;
    const int8_t *w;
    uint32_t w_bytes;
    const int32_t *bias;
    const tsr_requant_t *rq;
    int32_t in_h, in_w, in_c, out_h, out_w, out_c, kh, kw, sh, sw, pt, pl, pb, pr, off, scratch, out_bytes,
        ncores;
} pcase_t;

static const pcase_t cases[] = {
''' + "".join(table) + '''};

/* operands, output and scratch in L1, as a layer's tiles are */
static int8_t arena[40000] __attribute__((section(".bss.tsr.L1"), aligned(8)));

static tsr_conv_args_t args''' + (L1 if perf else '') + ''';
static tsr_pool_args_t pargs''' + (L1 if perf else '') + ''';
static const pcase_t *cur;
''' + (PERF_DECL if perf else '') + '''
static void body(void *unused)
{
    int k = hal_core_id();
    (void)unused;
''' + (PERF_START if perf else '') + '''    if (k < cur->ncores && cur->fn)
        cur->fn(&args, k, cur->ncores);
    else if (k < cur->ncores)
        cur->pool(&pargs, k, cur->ncores);
''' + (PERF_STOP if perf else '') + '''}

''' + MAIN_HEAD + '''    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pcase_t *c = &cases[i];
        int8_t *x = arena, *w = x + up4(c->x_bytes), *o = w + up4(c->w_bytes), *s = o + up4(c->out_bytes);
        memcpy(x, c->x, c->x_bytes);
        memcpy(w, c->w, c->w_bytes);
        memset(o, 0x5A, c->out_bytes);
        memset(&args, 0, sizeof args);
        args.in = x, args.in_h = c->in_h, args.in_w = c->in_w, args.in_c = c->in_c;
        args.weights = w, args.bias = c->bias, args.out = o;
        args.out_h = c->out_h, args.out_w = c->out_w, args.out_c = c->out_c;
        args.kh = c->kh, args.kw = c->kw, args.sh = c->sh, args.sw = c->sw;
        args.pad_t = c->pt, args.pad_l = c->pl, args.pad_b = c->pb, args.pad_r = c->pr;
        args.input_offset = c->off, args.rq = c->rq;''' + (PERF_ARGS if perf else '') + '''
        args.scratch = c->scratch ? s : 0, args.scratch_bytes = c->scratch;
        pargs.in = x, pargs.in_h = c->in_h, pargs.in_w = c->in_w, pargs.c = c->in_c, pargs.out = o;
        pargs.out_h = c->out_h, pargs.out_w = c->out_w, pargs.kh = c->kh, pargs.kw = c->kw, pargs.sh = c->sh;
        pargs.sw = c->sw, pargs.pad_t = c->pt, pargs.pad_l = c->pl, pargs.pad_b = c->pb, pargs.pad_r = c->pr;
        pargs.input_offset = c->off, pargs.rq = args.rq, pargs.in_int32 = 0;
        cur = c;
        ''' + (PERF_FORK if perf else 'hal_fork(body, 0);') + '''
        printf("CASE %u ", (unsigned)i);
        for (j = 0; j < c->out_bytes; j++)
            printf("%02x", (unsigned)(uint8_t)o[j]);
        printf("\\n");
    }
    printf("CASES done\\n");
    return 0;
}
''')
    return "".join(out)


def outputs(text):
    got = {}
    for line in text.splitlines():
        m = re.match(r"CASE (\d+) ([0-9a-f]*)$", line.strip())
        if m:
            got[int(m.group(1))] = bytes.fromhex(m.group(2))
    assert "CASES done" in text, text[-2000:]
    return got


PARTS = 2


def run(tmp_path, isa):
    from tessera import config, runners

    target = _target()
    defines = config.isa_defines(target) if isa else []
    assert not isa or defines == ["TSR_ISA_XPULPV2"]   # what targets/pulp_open.yaml asks for
    target["toolchain"]["cflags"] = list(target["toolchain"]["cflags"]) + ["-D" + d for d in defines]
    kernels = sorted(os.path.join(PNN, f) for f in os.listdir(PNN) if f.endswith(".c")) + PNN_FALLBACK
    got = {}
    # the cases in PARTS firmwares: their data and the kernels in one no
    # longer fit pulp_open's 224 kB code reservation
    step = -(-len(CASES) // PARTS)
    for k in range(0, len(CASES), step):
        where = tmp_path / f"part{k // step}"
        where.mkdir()
        src = where / "cases.c"
        src.write_text(firmware_source(CASES[k:k + step]))
        elf = build_firmware(str(where), [str(src), *kernels], target)
        got.update({k + i: out for i, out in outputs(runners.run(target["runner"], elf)).items()})
    return got


def test_the_scratch_fits_the_arena():
    for c in CASES:
        total = sum(-(-n // 4) * 4 for n in (c["x"].nbytes, c["w"].nbytes, c["expected"].nbytes))
        assert total + c["scratch"] * c["ncores"] <= 40000


@pytest.fixture(scope="module")
def xpulp_outputs(tmp_path_factory):
    return run(tmp_path_factory.mktemp("xpulp"), True)


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{c['op']}-{k}" for k, c in enumerate(CASES)])
def test_xpulp_kernel_matches_golden(xpulp_outputs, i):
    c = CASES[i]
    got = np.frombuffer(xpulp_outputs[i], dtype=c["expected"].dtype).reshape(c["expected"].shape)
    np.testing.assert_array_equal(got, c["expected"])


def test_portable_build_prints_the_same(tmp_path, xpulp_outputs):
    assert run(tmp_path, False) == xpulp_outputs
