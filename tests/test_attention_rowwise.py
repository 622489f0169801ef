"""The optimized libraries' row-wise kernels of attention (kernels/pulp_nn/
rowwise.c: pnn_softmax, pnn_layernorm, pnn_lut; kernels/cmsis_nn/rowwise.c:
tsr_cmsis_*; both over tessera/rowwise.h's 32-bit arithmetic), compiled by
the host gcc on their portable paths and called through ctypes, against the
golden model bit for bit on the reference kernels' own cases (every core
alone and all together): the table softmax, Deeploy's softmaxes, both
layer normalizations and lookup tables; and on rows chosen for the 32-bit
paths' edges (large sums, shifts across the word boundary, the fallbacks).
The Xpulp and DSP paths run in tests/test_attention_rowwise_gvsoc.py and
tests/test_attention_rowwise_qemu.py."""

import os

import numpy as np
import pytest
from hypothesis import given

from test_attention_kernels import (FEW, LayernormArgs, deeploy_softmax_cases, ilayernorm_cases,  # noqa: F401
                                    layernorm_int_cases)
from test_ref_kernels import NCORES, SOURCES, Case, ROOT, Rq, load_kernels, ptr, run_case, share_pixels
from test_ref_kernels_ops import LutArgs, SoftmaxArgs, lut_cases, softmax_cases
from tessera.frontend.tables import layernorm_params, softmax_params
from tessera.golden import ops
from tessera.ir import Requant

import ctypes
from ctypes import POINTER, c_int8, c_int32

ROWWISE = [os.path.join(ROOT, "kernels", "pulp_nn", "rowwise.c"), os.path.join(ROOT, "kernels", "cmsis_nn", "rowwise.c")]
INCLUDES = [os.path.join(ROOT, "kernels", "pulp_nn"), os.path.join(ROOT, "kernels", "cmsis_nn"),
            os.path.join(ROOT, "kernels", "reference")]
LIBS = {"pnn": "pnn_", "cmsis": "tsr_cmsis_"}


@pytest.fixture(scope="module")
def rowlib(tmp_path_factory):
    flags = os.environ.get("TESSERA_REF_CFLAGS", "")
    os.environ["TESSERA_REF_CFLAGS"] = flags + " " + " ".join("-I" + d for d in INCLUDES)
    try:
        dll = load_kernels(tmp_path_factory.mktemp("rowwise") / "librw.so", [*SOURCES, *ROWWISE], "",
                            tuple((p + op, cls) for p in LIBS.values()
                                  for op, cls in (("softmax", SoftmaxArgs), ("layernorm", LayernormArgs),
                                                  ("lut", LutArgs))), "row-wise kernels")
    finally:
        os.environ["TESSERA_REF_CFLAGS"] = flags
    for p in LIBS.values():
        for op in ("softmax", "layernorm", "lut"):
            # two modules declare the softmax's struct alike: the call takes either
            getattr(dll, p + op).argtypes = None
    return dll


def as_lib(case, lib, op):
    """The reference kernel's Case on library `lib`'s kernel."""
    return Case(LIBS[lib] + op, case.build, case.expected, case.out_dtype, case.share, case.scratch_bytes)


@pytest.mark.parametrize("lib", sorted(LIBS))
@given(case=softmax_cases())
@FEW
def test_table_softmax_matches_golden(rowlib, lib, case):
    run_case(rowlib, as_lib(case[0], lib, "softmax"), *case[1:])


@pytest.mark.parametrize("lib", sorted(LIBS))
@given(case=deeploy_softmax_cases())
@FEW
def test_deeploy_softmax_matches_golden(rowlib, lib, case):
    run_case(rowlib, as_lib(case[0], lib, "softmax"), *case[1:])


@pytest.mark.parametrize("lib", sorted(LIBS))
@given(case=lut_cases())
@FEW
def test_lut_matches_golden(rowlib, lib, case):
    c = as_lib(case[0], lib, "lut")
    if lib == "pnn":
        c.share = pnn_lut_share(c)
    run_case(rowlib, c, *case[1:])


def pnn_lut_share(case):
    """pnn_lut's split: one table's values to the cores in runs of whole
    words (pnn_chunk, quantum 4), a table per channel the reference's
    pixels."""
    args, _ = case.build(np.zeros(case.expected.size, np.int8).ctypes.data, None)
    if args.per_channel:
        return case.share

    def share(shape, core, ncores):
        n = int(np.prod(shape))
        chunk = -(-(-(-n // ncores)) // 4) * 4
        mask = np.zeros(n, dtype=bool)
        mask[core * chunk:(core + 1) * chunk] = True
        return mask.reshape(shape)
    return share


@pytest.mark.parametrize("lib", sorted(LIBS))
@given(case=ilayernorm_cases())
@FEW
def test_ilayernorm_matches_golden(rowlib, lib, case):
    run_case(rowlib, as_lib(case[0], lib, "layernorm"), *case[1:])


def layernorm_case(x, rq, e, off):
    h, w, c = x.shape
    acc = ops.layernorm(x, off, [e], None, "int")
    expected = ops.requantize(acc, rq.golden).astype(np.int8)

    def build(out_ptr, scratch):
        rqs = rq.struct()
        args = LayernormArgs(ptr(x, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), h * w, c, off, 0, e,
                             None, None, ctypes.pointer(rqs))
        return args, (x, rq, rqs)
    return Case("tsr_layernorm", build, expected, np.int8, share_pixels)


@pytest.mark.parametrize("lib", sorted(LIBS))
@given(case=layernorm_int_cases(), ncores=NCORES)
@FEW
def test_layernorm_int_matches_golden(rowlib, lib, case, ncores):
    x, (s_x, zp_x, *_), e, rq, _, rng = case
    run_case(rowlib, as_lib(layernorm_case(x, rq, e, -zp_x), lib, "layernorm"), ncores, rng)


EDGE_LAYERNORMS = [
    # (channels, input offset, shift per channel, spread): shifts below, at and above 32 (the
    # requantization's words), a row of one value repeated (D = eps alone: R near 2^32), wide
    # offsets (the reference's 64-bit sums past 256), a row of 4097 (its 64-bit path)
    (64, 2, None, 30), (64, -200, None, 2), (7, 0, [31, 32, 33, 20, 1, 45, 60], 60), (128, 255, None, 0),
    (48, 300, None, 40), (4097, 0, None, 50), (200, -128, [32] * 200, 100),
]


@pytest.mark.parametrize("lib", sorted(LIBS))
@pytest.mark.parametrize("i", range(len(EDGE_LAYERNORMS)))
def test_layernorm_int_edges(rowlib, lib, i):
    c, off, shifts, spread = EDGE_LAYERNORMS[i]
    rng = np.random.default_rng(100 + i)
    x = np.clip(rng.normal(0, spread, size=(3, 2, c)) + rng.integers(-30, 30), -128 - min(off, 0),
                127 - max(off, 0) if abs(off) <= 128 else 127).astype(np.int8)
    e, mul, add, shift = layernorm_params(rng.normal(1, 0.5, c), rng.normal(0, 2, c), 1e-5, 0.05, 0.03, 3, c)
    if shifts is not None:
        # the same real multipliers at other shifts (the kernel must take any the arrays hold)
        mul = [int(round(m * 2.0 ** (s - old))) for m, s, old in zip(mul, shifts, shift)]
        add = [int(round(a * 2.0 ** (s - old))) for a, s, old in zip(add, shifts, shift)]
        mul = [max(-2**31, min(2**31 - 1, m)) for m in mul]
        add = [max(-2**31, min(2**31 - 1, a)) for a in add]
        shift = shifts
    rq = Rq(mul, add, shift, 1, 3, -128, 127, "half_up")
    run_case(rowlib, as_lib(layernorm_case(x, rq, e, off), lib, "layernorm"), 3, rng)


@pytest.mark.parametrize("lib", sorted(LIBS))
@pytest.mark.parametrize("c,s_x,s_y,spread", [(49, 0.08, 1 / 256, 30), (64, 0.5, 1 / 255, 3), (300, 0.001, 0.003, 90),
                                              (1, 0.1, 1 / 256, 5), (4095, 0.01, 1 / 256, 60), (256, 1.0, 0.01, 0)])
def test_table_softmax_edges(rowlib, lib, c, s_x, s_y, spread):
    """Rows of one value, of equal values (the sum c 2^24, beyond 32 bits from
    256 on: the reference's division), long rows, flat and peaked ones."""
    rng = np.random.default_rng(c)
    x = np.clip(rng.normal(0, spread, size=(2, 3, c)), -128, 127).astype(np.int8)
    table, mul, shift = softmax_params(s_x, s_y, channels=c)
    rq = Requant(mul=[mul], add=[0], shift=[shift], zero_point=-128, lo=-128, hi=127)
    expected = ops.softmax(x, table, rq).astype(np.int8)
    tab = np.array(table, dtype=np.int32)

    def build(out_ptr, scratch):
        args = SoftmaxArgs(ptr(x, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), 6, c, ptr(tab, c_int32),
                           mul, shift, -128, -128, 127)
        return args, (x, tab)
    run_case(rowlib, Case(LIBS[lib] + "softmax", build, expected, np.int8, share_pixels), 4, rng)
