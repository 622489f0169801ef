"""The optimized libraries' transposes (kernels/pulp_nn/movement.c:
pnn_transpose; kernels/cmsis_nn/movement.c: tsr_cmsis_transpose; both over
tessera/transpose.h), compiled by the host gcc on their portable paths and
called through ctypes, against the golden model bit for bit, every core
alone (its share of output rows and nothing else) and all together: random
shapes and perms (odd sizes, the 4x4 blocks' edges, the input off a word),
and the transformers' head splits and merges. The Xpulp and Cortex-M paths
run in tests/test_attention_rowwise_gvsoc.py and
tests/test_attention_rowwise_qemu.py (their transpose cases)."""

import ctypes
import os
from ctypes import POINTER, c_int8, c_int32

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_attention_rowwise import INCLUDES, LIBS
from test_ref_kernels import NCORES, ROOT, SOURCES, Case, load_kernels, run_case, share_pixels
from test_ref_kernels_ops import TransposeArgs
from tessera.golden import ops

MOVEMENT = [os.path.join(ROOT, "kernels", "pulp_nn", "movement.c"),
            os.path.join(ROOT, "kernels", "cmsis_nn", "movement.c")]


@pytest.fixture(scope="module")
def tlib(tmp_path_factory):
    flags = os.environ.get("TESSERA_REF_CFLAGS", "")
    os.environ["TESSERA_REF_CFLAGS"] = flags + " " + " ".join("-I" + d for d in INCLUDES)
    try:
        return load_kernels(tmp_path_factory.mktemp("transpose") / "libtp.so", [*SOURCES, *MOVEMENT], "",
                            tuple((p + "transpose", TransposeArgs) for p in LIBS.values()), "transposes")
    finally:
        os.environ["TESSERA_REF_CFLAGS"] = flags


def case(fn, shape, perm, rng, offset=0):
    """`fn` on a random int8 block of `shape`, the input `offset` bytes past a word."""
    buf = np.zeros(int(np.prod(shape)) + 4, dtype=np.int8)
    x = buf[offset:offset + int(np.prod(shape))].reshape(shape)
    x[...] = rng.integers(-128, 128, size=shape)
    expected = np.ascontiguousarray(ops.transpose(x, perm).astype(np.int8))

    def build(out_ptr, scratch):
        return TransposeArgs(x.ctypes.data_as(POINTER(c_int8)), ctypes.cast(out_ptr, POINTER(c_int8)), *shape,
                             (c_int32 * 3)(*perm)), (buf, x)
    return Case(fn, build, expected, np.int8, share_pixels)


@pytest.mark.parametrize("lib", sorted(LIBS))
@given(shape=st.tuples(*[st.integers(1, 19)] * 3), perm=st.permutations([0, 1, 2]), ncores=NCORES,
       offset=st.integers(0, 3), seed=st.integers(0, 2**31))
@settings(max_examples=60, deadline=None)
def test_transpose_matches_golden(tlib, lib, shape, perm, ncores, offset, seed):
    rng = np.random.default_rng(seed)
    run_case(tlib, case(LIBS[lib] + "transpose", shape, perm, rng, offset), ncores, rng)


# the transformers' transposes as the kernel sees them (tessera.config.views.transpose_view):
# K^T [1,T,K] -> [1,K,T] runs as [T,1,K] -> [K,1,T]; head split [T,H,D] -> [H,T,D]; head merge;
# [H,T,D] -> [H,D,T]
TRANSFORMER = [((49, 1, 64), (2, 1, 0)), ((64, 1, 49), (2, 1, 0)), ((49, 4, 16), (1, 0, 2)),
               ((4, 49, 16), (1, 0, 2)), ((4, 49, 16), (0, 2, 1)), ((3, 65, 64), (0, 2, 1)), ((66, 1, 66), (2, 1, 0))]


@pytest.mark.parametrize("lib", sorted(LIBS))
@pytest.mark.parametrize("shape,perm", TRANSFORMER)
def test_transformer_transposes(tlib, lib, shape, perm):
    rng = np.random.default_rng(sum(shape))
    for ncores in (1, 8):
        run_case(tlib, case(LIBS[lib] + "transpose", shape, perm, rng), ncores, rng)
