"""Attention's row-wise ops in the reference kernels (kernels/reference/
attention.c), compiled by the host gcc and called through ctypes, against
the golden model bit for bit (every core alone and all together, as in
test_ref_kernels): Deeploy's integer softmaxes (iSoftmax, ITAMax,
ITAPartialMax) and both layer normalizations; and the golden model's
LayerNormalization against the float computation ONNX Runtime does (within
one output step)."""

import ctypes
from ctypes import POINTER, c_int8, c_int32, c_int64

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st, HealthCheck

from test_ref_kernels import NCORES, Case, RequantT, Rq, arrays, lib, ptr, run_case, share_pixels  # noqa: F401
from tessera.frontend.tables import check_deeploy_softmax, layernorm_params
from tessera.golden import ops
from tessera.ir import Requant

FEW = settings(max_examples=int(__import__("os").environ.get("TSR_EXAMPLES", 60)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODES = {"isoftmax": 1, "itamax": 2, "itapartialmax": 3}   # TSR_SOFTMAX_*


class SoftmaxArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8)), ("out", POINTER(c_int8)), ("pixels", c_int32), ("c", c_int32),
                ("table", POINTER(c_int32)), ("mul", c_int32), ("shift", c_int32), ("zero_point", c_int32),
                ("lo", c_int32), ("hi", c_int32), ("rounding", c_int32), ("mode", c_int32),
                ("params", c_int32 * 5)]


class LayernormArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8)), ("out", POINTER(c_int8)), ("pixels", c_int32), ("c", c_int32),
                ("input_offset", c_int32), ("mode", c_int32), ("eps", c_int64),
                ("weight", POINTER(c_int32)), ("bias", POINTER(c_int32)), ("rq", POINTER(RequantT))]


def test_layernorm_struct_matches_header(tmp_path):
    from test_ref_kernels import header_layout
    import shutil
    if shutil.which("gcc") is None:
        pytest.skip("no host gcc")
    for struct, cls in (("tsr_layernorm_args_t", LayernormArgs), ("tsr_softmax_args_t", SoftmaxArgs)):
        fields = ["in" if f[0] == "in_" else f[0] for f in cls._fields_]
        want = [ctypes.sizeof(cls)] + [getattr(cls, f[0]).offset for f in cls._fields_]
        assert header_layout(tmp_path, struct, fields) == want, struct


# ---- Deeploy's softmaxes ---------------------------------------------------------------------

@st.composite
def deeploy_params(draw, c):
    mode = draw(st.sampled_from(sorted(MODES)))
    if mode == "isoftmax":
        # Deeploy's graphs: (1, 345, 62395, 255) and (1, 173, 15599, 127); and others in range
        params = draw(st.sampled_from([[1, 345, 62395, 255, 256], [1, 173, 15599, 127, 256],
                                       [draw(st.integers(1, 3)), draw(st.integers(100, 400)),
                                        draw(st.integers(0, 100000)), draw(st.integers(2, 300)),
                                        draw(st.sampled_from([16, 128, 256]))]]))
    elif mode == "itamax":
        params = [draw(st.sampled_from([256, 128]))]
    else:
        params = [draw(st.integers(1, c)), draw(st.sampled_from([256, 128]))]
    assume(check_deeploy_softmax(mode, params, c) is None)
    return mode, params


@st.composite
def deeploy_softmax_cases(draw):
    h, w, c = draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(1, 70))
    x, rng = arrays(draw, (h, w, c))
    if draw(st.booleans()):
        # attention scores: a few large ones and a tail (the exponent's clamp, ITA's shifts)
        x = np.clip(rng.normal(0, draw(st.sampled_from([4, 30, 90])), size=(h, w, c)), -128, 127).astype(np.int8)
    mode, params = draw(deeploy_params(c))
    expected = ops.softmax(x, params, None, mode).astype(np.int8)
    p = (c_int32 * 5)(*(params + [0] * (5 - len(params))))

    def build(out_ptr, scratch):
        args = SoftmaxArgs(ptr(x, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), h * w, c, None,
                           0, 0, 0, -128, 127, 0, MODES[mode], p)
        return args, (x,)
    return Case("tsr_softmax", build, expected, np.int8, share_pixels), draw(NCORES), rng


@given(deeploy_softmax_cases())
@FEW
def test_deeploy_softmax_matches_golden(lib, case):
    run_case(lib, *case)


def test_isoftmax_probabilities_sum_to_about_one():
    """iSoftmax's outputs are probabilities in 255ths: a row sums to at most
    255 (the floors lose at most one per value), the maximum gets the most."""
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(5, 1, 16)).astype(np.int8)
    y = ops.softmax(x, [1, 345, 62395, 255, 256], None, "isoftmax").astype(np.int64) + 128
    assert np.all(y.sum(axis=-1) <= 255) and np.all(y.sum(axis=-1) >= 255 - 16)
    assert np.all(np.take_along_axis(y, x.argmax(axis=-1)[..., None], -1)[..., 0] == y.max(axis=-1))


def test_deeploy_softmax_refuses_a_wrapping_configuration():
    assert check_deeploy_softmax("isoftmax", [1, 345, 62395, 1, 256], 8)         # log2 1: int8 exponent wraps
    assert check_deeploy_softmax("isoftmax", [1 << 20, 345, 0, 255, 256], 8)     # polynomial leaves int32
    assert check_deeploy_softmax("isoftmax", [1, 345, 62395, 255, 256], 1 << 16)  # the sum leaves 32 bits
    assert check_deeploy_softmax("isoftmax", [1, 345, 62395, 255, 256], 64) is None


# ---- layer normalization ---------------------------------------------------------------------

def float_layernorm(x_stored, shift, s_x, zp_x, gamma, beta, eps, s_y, zp_y):
    """ONNX Runtime's QDQ LayerNormalization: float32 dequantization, the
    float normalization (population variance), float32 quantization
    rounding half to even; stored int8 out (uint8 shifted by `shift`)."""
    xr = (x_stored.astype(np.float32) + np.float32(shift - zp_x)) * np.float32(s_x)
    mean = xr.mean(axis=-1, keepdims=True, dtype=np.float32)
    var = ((xr - mean) ** 2).mean(axis=-1, keepdims=True, dtype=np.float32)
    y = (xr - mean) / np.sqrt(var + np.float32(eps)) * gamma.astype(np.float32) + beta.astype(np.float32)
    q = np.rint(y / np.float32(s_y)) + zp_y
    return np.clip(q - shift, -128, 127).astype(np.int64)


@st.composite
def layernorm_int_cases(draw):
    h, w, c = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(2, 200))   # both sides of 128
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spread = draw(st.sampled_from([1, 5, 40, 120]))
    x = np.clip(rng.normal(0, spread, size=(h, w, c)) + rng.integers(-20, 20, size=(h, w, 1)),
                -128, 127).astype(np.int8)
    s_x = draw(st.sampled_from([0.01, 0.05, 0.2]))
    zp_x = draw(st.integers(-20, 20))
    gamma = rng.normal(1.0, 0.4, size=c)
    beta = rng.normal(0.0, 0.5, size=c)
    eps = draw(st.sampled_from([1e-5, 1e-6, 1e-3]))
    s_y = draw(st.sampled_from([0.02, 0.04, 0.1]))
    zp_y = draw(st.integers(-10, 10))
    e, mul, add, shift = layernorm_params(gamma, beta, eps, s_x, s_y, zp_y, c)
    rq = Rq(mul, add, shift, 1, zp_y, -128, 127, "half_up")
    acc = ops.layernorm(x, -zp_x, [e], None, "int")
    expected = ops.requantize(acc, rq.golden).astype(np.int8)
    return x, (s_x, zp_x, gamma, beta, eps, s_y, zp_y), e, rq, expected, rng


@given(layernorm_int_cases(), NCORES)
@FEW
def test_layernorm_int_matches_golden(lib, case, ncores):
    x, (s_x, zp_x, *_), e, rq, expected, rng = case
    h, w, c = x.shape

    def build(out_ptr, scratch):
        rqs = rq.struct()
        args = LayernormArgs(ptr(x, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), h * w, c, -zp_x, 0, e,
                             None, None, ctypes.pointer(rqs))
        return args, (x, rq, rqs)
    run_case(lib, Case("tsr_layernorm", build, expected, np.int8, share_pixels), ncores, rng)


@given(layernorm_int_cases())
@FEW
def test_layernorm_int_within_one_step_of_float(case):
    """The exact integer normalization, requantized per channel, against the
    float LayerNormalization ONNX Runtime computes between DQ and Q."""
    x, (s_x, zp_x, gamma, beta, eps, s_y, zp_y), _, _, expected, _ = case
    ref = float_layernorm(x, 0, s_x, zp_x, gamma, beta, eps, s_y, zp_y)
    assert np.abs(expected.astype(np.int64) - ref).max() <= 1


@st.composite
def ilayernorm_cases(draw):
    h, w, c = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 140))
    x, rng = arrays(draw, (h, w, c))
    off = draw(st.sampled_from([0, 128]))
    weight = rng.integers(200000, 330000, size=c)
    bias = rng.integers(-40000, 40000, size=c)
    shift = draw(st.sampled_from([14, 16]))
    lo, hi = draw(st.sampled_from([(-128, 127), (-64, 63)]))
    rq = Requant(mul=[1], add=[0], shift=[shift], rounding="floor", zero_point=0, lo=lo, hi=hi)
    expected = ops.layernorm(x, off, list(weight) + list(bias), rq, "ilayernorm").astype(np.int8)
    wt, bs = weight.astype(np.int32), bias.astype(np.int32)
    sh = np.array([shift], np.int8)
    one = np.array([1], np.int32)

    def build(out_ptr, scratch):
        rqs = RequantT(ptr(one, c_int32), None, ptr(sh, c_int8), 0, 0, lo, hi, 1)
        args = LayernormArgs(ptr(x, c_int8), ctypes.cast(out_ptr, POINTER(c_int8)), h * w, c, off, 1, 0,
                             ptr(wt, c_int32), ptr(bs, c_int32), ctypes.pointer(rqs))
        return args, (x, wt, bs, sh, one, rqs)
    return Case("tsr_layernorm", build, expected, np.int8, share_pixels), draw(NCORES), rng


@given(ilayernorm_cases())
@FEW
def test_ilayernorm_matches_golden(lib, case):
    run_case(lib, *case)


def test_isqrt_is_exact_at_squares():
    v = np.array([0, 1, 2, 3, 4, 15, 16, 17, (1 << 31) - 1, (1 << 31), (1 << 52) + 5, (1 << 62) - 1], np.int64)
    r = ops.isqrt(v)
    assert np.all(r * r <= v) and np.all((r + 1) * (r + 1) > v)


# ---- the optimized matmuls (attention's Q.K^T and P.V) --------------------------------------

import os                                                                  # noqa: E402

from test_ref_kernels import MatmulArgs, OFFSETS, PlaneRq, finish, int8s, load_kernels, requants  # noqa: E402

from helpers import PNN_FALLBACK                                           # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PNN_SOURCES = sorted(os.path.join(ROOT, "kernels", "pulp_nn", f) for f in os.listdir(os.path.join(ROOT, "kernels", "pulp_nn"))
                     if f.endswith(".c")) + PNN_FALLBACK
CMSIS_SOURCES = [os.path.join(ROOT, "kernels", "cmsis_nn", "matmul.c")]


@pytest.fixture(scope="module")
def pnn(tmp_path_factory):
    return load_kernels(tmp_path_factory.mktemp("pnn_att") / "libpnn.so", PNN_SOURCES, "pnn_",
                        (("matmul2", MatmulArgs),), "PULP-NN kernels")


@pytest.fixture(scope="module")
def cmsis(tmp_path_factory):
    import subprocess
    src = [*CMSIS_SOURCES]
    inc = ["-I", os.path.join(ROOT, "kernels", "cmsis_nn"), "-I", os.path.join(ROOT, "kernels", "cmsis_nn", "include")]
    so = tmp_path_factory.mktemp("cmsis_att") / "libcm.so"
    res = subprocess.run(["gcc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                          "-I", os.path.join(ROOT, "kernels", "include"), *inc, *src, "-o", str(so)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    dll = ctypes.CDLL(str(so))
    dll.tsr_cmsis_matmul.argtypes = [POINTER(MatmulArgs), ctypes.c_int, ctypes.c_int]
    return dll


def unit_share(bt, n, core, ncores):
    """pnn_matmul2's split: units of (batch, 4 output columns), contiguous runs per core."""
    blocks = -(-n // 4)
    units = bt * blocks
    size = -(-units // ncores)
    u0, u1 = min(size * core, units), min(size * core + size, units)
    def share(shape, core_, ncores_):
        mask = np.zeros(shape, bool)
        for u in range(u0, u1):
            y, blk = divmod(u, blocks)
            mask[y, :, blk * 4:blk * 4 + 4] = True
        return mask
    return share


@st.composite
def optimized_matmul_cases(draw, lib):
    bt, m = draw(st.integers(1, 5)), draw(st.integers(1, 9))
    k, n = draw(st.integers(1, 70)), draw(st.integers(1, 23))
    shared, trans_b = draw(st.booleans()), draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    a = int8s(rng, (bt, m, k))
    b = int8s(rng, (1 if shared else bt, n, k) if trans_b else (1 if shared else bt, k, n))
    offs = [draw(st.one_of(st.just(0), st.just(128), OFFSETS)), draw(st.one_of(st.just(0), OFFSETS))]
    acc = ops.matmul(a, b, offs, trans_b)
    kind = draw(st.sampled_from(["channel", "batch", "none"]))
    if kind == "channel":
        rq = draw(requants(n, int(np.abs(acc).max(initial=0))))
    elif kind == "batch" and bt > 1:
        rq = PlaneRq(rng, (bt, 1, 1), n, acc, draw(st.sampled_from(["half_up", "floor"])), True)
    else:
        rq = None
    expected, dtype = finish(acc, rq)
    kp = (k + 3) // 4 * 4
    scratch = (4 * kp + 16 + 4 * m) if lib == "pnn" else (kp * n + 7 * n + 4 * kp + 12)
    a_c, b_c = np.ascontiguousarray(a), np.ascontiguousarray(b)
    ncores = draw(NCORES) if lib == "pnn" else 1

    def build(out_ptr, scratch_ptr):
        rqs = rq.struct() if rq is not None else None
        args = MatmulArgs(ptr(a_c, c_int8), ptr(b_c, c_int8), out_ptr, bt, m, n, k, 0 if shared else k * n,
                          offs[0], offs[1], ctypes.pointer(rqs) if rqs is not None else None, int(trans_b),
                          scratch_ptr, scratch)
        return args, (a_c, b_c, rq, rqs)
    fn = "pnn_matmul2" if lib == "pnn" else "tsr_cmsis_matmul"
    case = Case(fn, build, expected, dtype, share_pixels, scratch_bytes=scratch)
    if lib == "pnn":
        case.share = lambda shape, core, nc: unit_share(bt, n, core, nc)(shape, core, nc)
    else:
        case.share = lambda shape, core, nc: np.full(shape, core == 0)
    return case, ncores, rng


@given(optimized_matmul_cases("pnn"))
@FEW
def test_pulp_nn_matmul_matches_golden(pnn, case):
    """pnn_matmul2 (its portable path here; Xpulp on GVSoC in
    test_attention_gvsoc.py): any offsets, per-channel and per-batch
    requantization, int32 outputs, K not a multiple of 4, each core its
    (batch, 4 columns) units."""
    run_case(pnn, *case)


@given(optimized_matmul_cases("cmsis"))
@FEW
def test_cmsis_nn_matmul_matches_golden(cmsis, case):
    """tsr_cmsis_matmul with tsr_dsp.h's portable lanes (the DSP
    instructions under QEMU in the stm32h7 builds)."""
    run_case(cmsis, *case)
