"""The portable reference kernels (kernels/reference/*.c), compiled by the host gcc
and called through ctypes, against the golden model (tessera.golden.ops) bit
for bit, on random tiles drawn by hypothesis.

A kernel call computes one tile with this tile's padding; the golden ops are
given the same input slice and the same padding, so a tile is checked on its
own, and test_tiled_layer_* put tiles together into a whole padded layer.
Every kernel is called once per core index on the same buffers (the union
must be exact) and, with several cores, once per core alone on poisoned
output and scratch (a core writes only its own share and its own scratch).
"""

import ctypes
import math
import os
import shutil
import subprocess
from ctypes import POINTER, c_int, c_int8, c_int32, c_void_p

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from tessera.golden import ops
from tessera.ir import Requant

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF_DIR = os.path.join(ROOT, "kernels", "reference")
INCLUDE = os.path.join(ROOT, "kernels", "include")
SOURCES = sorted(os.path.join(REF_DIR, f) for f in os.listdir(REF_DIR) if f.endswith(".c"))
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# ---- ctypes mirror of kernels.h --------------------------------------------

class PlaneT(ctypes.Structure):
    _fields_ = [("plane", c_int32), ("step_h", c_int32), ("step_w", c_int32)]


class RequantT(ctypes.Structure):
    _fields_ = [("mul", POINTER(c_int32)), ("add", POINTER(c_int32)), ("shift", POINTER(c_int8)),
                ("per_channel", c_int32), ("zero_point", c_int32),
                ("lo", c_int32), ("hi", c_int32), ("rounding", c_int32), ("elem", PlaneT),
                ("divisor", c_int32), ("neg_mul", POINTER(c_int32)), ("neg_shift", POINTER(c_int8)),
                ("add_shift", c_int32), ("split", c_int32)]


class ConvArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8)), ("in_h", c_int32), ("in_w", c_int32), ("in_c", c_int32),
                ("weights", POINTER(c_int8)), ("bias", POINTER(c_int32)), ("out", c_void_p),
                ("out_h", c_int32), ("out_w", c_int32), ("out_c", c_int32),
                ("kh", c_int32), ("kw", c_int32), ("sh", c_int32), ("sw", c_int32),
                ("pad_t", c_int32), ("pad_l", c_int32), ("pad_b", c_int32), ("pad_r", c_int32),
                ("input_offset", c_int32), ("rq", POINTER(RequantT)),
                ("scratch", POINTER(c_int8)), ("scratch_bytes", c_int32), ("bias_elem", PlaneT),
                ("dh", c_int32), ("dw", c_int32), ("weight_offset", c_int32)]


class PoolArgs(ctypes.Structure):
    _fields_ = [("in_", POINTER(c_int8)), ("in_h", c_int32), ("in_w", c_int32), ("c", c_int32),
                ("out", POINTER(c_int8)), ("out_h", c_int32), ("out_w", c_int32),
                ("kh", c_int32), ("kw", c_int32), ("sh", c_int32), ("sw", c_int32),
                ("pad_t", c_int32), ("pad_l", c_int32), ("pad_b", c_int32), ("pad_r", c_int32),
                ("input_offset", c_int32), ("rq", POINTER(RequantT)), ("in_int32", c_int32)]


class AddArgs(ctypes.Structure):
    _fields_ = [("a", POINTER(c_int8)), ("b", POINTER(c_int8)), ("out", c_void_p), ("n", c_int32),
                ("in_mul", c_int32 * 2), ("in_offset", c_int32 * 2), ("in_shift", c_int32 * 2),
                ("rq", POINTER(RequantT)),
                ("in_int32", c_int32), ("out_w", c_int32), ("out_c", c_int32)]


class MatmulArgs(ctypes.Structure):
    _fields_ = [("a", POINTER(c_int8)), ("b", POINTER(c_int8)), ("out", c_void_p),
                ("out_h", c_int32), ("out_w", c_int32), ("out_c", c_int32), ("k", c_int32),
                ("b_batch", c_int32), ("a_offset", c_int32), ("b_offset", c_int32),
                ("rq", POINTER(RequantT)), ("trans_b", c_int32), ("scratch", POINTER(c_int8)),
                ("scratch_bytes", c_int32)]


STRUCTS = {"tsr_plane_t": PlaneT, "tsr_requant_t": RequantT, "tsr_conv_args_t": ConvArgs,
           "tsr_pool_args_t": PoolArgs, "tsr_add_args_t": AddArgs, "tsr_matmul_args_t": MatmulArgs}
C_NAMES = {"in_": "in"}

# A C probe of the real header's layout: sizeof and offsetof every field, in
# the order of the ctypes mirrors above.
LAYOUT_PROBE = "#include <stddef.h>\n#include \"tessera/kernels.h\"\n" \
    "static const size_t layout[] = {\n" + "".join(
        f"    sizeof({s}),\n" + "".join(f"    offsetof({s}, {C_NAMES.get(f[0], f[0])}),\n"
                                        for f in cls._fields_)
        for s, cls in STRUCTS.items()) + \
    "};\nsize_t tsr_test_layout(size_t i) { return layout[i]; }\n"


def _ctypes_layout():
    out = []
    for cls in STRUCTS.values():
        out.append(ctypes.sizeof(cls))
        out.extend(getattr(cls, f[0]).offset for f in cls._fields_)
    return out


# every kernel the libraries export is called as fn(args *, core, ncores)
KERNEL_ARGS = (("conv2d", ConvArgs), ("pointwise", ConvArgs), ("depthwise", ConvArgs), ("linear", ConvArgs),
               ("maxpool", PoolArgs), ("avgpool", PoolArgs), ("add", AddArgs))


def load_kernels(so, sources, prefix, kernels=KERNEL_ARGS, what="kernels"):
    """Compile kernel sources into the shared library `so` with the host gcc
    (CFLAGS and TESSERA_REF_CFLAGS) and load it, each of `kernels` declared
    as prefix + name(args *, core, ncores)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip(f"no host gcc to compile the {what}")
    # TESSERA_REF_CFLAGS adds flags, e.g. "-fsanitize=address,undefined" (run
    # pytest with LD_PRELOAD=$(gcc -print-file-name=libasan.so) for that)
    extra = os.environ.get("TESSERA_REF_CFLAGS", "").split()
    cmd = [gcc, *CFLAGS, *extra, "-shared", "-fPIC", "-I", INCLUDE, *sources, "-o", str(so)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stderr}"
    dll = ctypes.CDLL(str(so))
    for name, cls in kernels:
        fn = getattr(dll, prefix + name)
        fn.argtypes = [POINTER(cls), c_int, c_int]
        fn.restype = None
    return dll


@pytest.fixture(scope="session")
def lib(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("refkernels")
    probe = tmp / "layout_probe.c"
    probe.write_text(LAYOUT_PROBE)
    dll = load_kernels(tmp / "libtsr_ref.so", [*SOURCES, str(probe)], "tsr_",
                       KERNEL_ARGS + (("matmul", MatmulArgs),), "reference kernels")
    dll.tsr_test_layout.argtypes = [ctypes.c_size_t]
    dll.tsr_test_layout.restype = ctypes.c_size_t
    return dll


def header_layout(tmp, struct, fields):
    """[sizeof, offsetof each field] of a struct of the real kernels.h, from
    a probe compiled by the host gcc."""
    src = tmp / "probe.c"
    offsets = "".join(f', offsetof({struct}, {f})' for f in fields)
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include "tessera/kernels.h"\n'
                   f'int main(void){{printf("%zu{" %zu" * len(fields)}", sizeof({struct}){offsets});return 0;}}\n')
    exe = tmp / "probe"
    subprocess.run(["gcc", "-I", INCLUDE, str(src), "-o", str(exe)], check=True)
    return [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]


def test_struct_layout_matches_header(lib):
    expected = _ctypes_layout()
    assert [lib.tsr_test_layout(i) for i in range(len(expected))] == expected


# ---- compiling for every target ------------------------------------------

CROSS = {
    "host gcc": ["gcc"],
    "arm-none-eabi-gcc (cortex-m7)": ["arm-none-eabi-gcc", "-mcpu=cortex-m7", "-mthumb"],
    "riscv64-unknown-elf-gcc (rv32imc)": ["riscv64-unknown-elf-gcc", "-misa-spec=2.2",
                                          "-march=rv32imc", "-mabi=ilp32"],
}


def _libc_flags(cc, tmp):
    """Flags that give `cc` the C library's headers: none when it finds them
    itself (host gcc, arm-none-eabi with newlib), picolibc's specs when that
    is the only libc installed (Debian's riscv64-unknown-elf-gcc)."""
    probe = tmp / "probe.c"
    probe.write_text("#include <stdint.h>\n#include <string.h>\n")
    base = [cc, "-c", str(probe), "-o", str(tmp / "probe.o")]
    if subprocess.run(base, capture_output=True).returncode == 0:
        return []
    specs = subprocess.run([cc, "-print-file-name=picolibc.specs"],
                           capture_output=True, text=True).stdout.strip()
    if os.path.isabs(specs) and subprocess.run(base + ["--specs=picolibc.specs"],
                                               capture_output=True).returncode == 0:
        return ["--specs=picolibc.specs"]
    pytest.skip(f"{cc} has no C library headers (<stdint.h>, <string.h>): install newlib or picolibc")


def assert_compiles_cleanly(target, sources, tmp):
    """Every source compiles on its own for `target` (a CROSS entry) without
    a single diagnostic."""
    cc, *machine = target
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    flags = _libc_flags(cc, tmp)
    for src in sources:
        obj = tmp / (os.path.basename(src) + ".o")
        cmd = [cc, *flags, *machine, *CFLAGS, "-I", INCLUDE, "-c", src, "-o", str(obj)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stderr}"
        assert res.stderr == "", res.stderr


@pytest.mark.parametrize("target", sorted(CROSS))
def test_kernels_compile_cleanly(target, tmp_path):
    assert_compiles_cleanly(CROSS[target], SOURCES, tmp_path)


# ---- building arguments ----------------------------------------------------

def ptr(arr, ctype):
    return arr.ctypes.data_as(POINTER(ctype)) if arr is not None else None


ROUNDING_C = {"half_up": 0, "floor": 1, "tflite": 2, "tflite_div": 3}   # TSR_ROUND_*


class Rq:
    """A requantization both as the golden model's Requant and as the C
    struct (arrays kept alive here)."""

    def __init__(self, mul, add, shift, per_channel, zero_point, lo, hi, rounding, divisor=None, neg=None):
        self.golden = Requant(mul=list(mul), add=list(add) if add is not None else [0],
                              shift=list(shift), rounding=rounding,
                              zero_point=zero_point, lo=lo, hi=hi, divisor=divisor,
                              neg_mul=[neg[0]] if neg else None, neg_shift=[neg[1]] if neg else None)
        self.neg = neg   # (multiplier, shift) of a negative accumulator (a LeakyRelu folded), or None
        self.divisor = divisor or 0
        self.mul = np.array(mul, dtype=np.int32)
        self.add = np.array(add, dtype=np.int32) if add is not None else None
        self.shift = np.array(shift, dtype=np.int8)
        self.per_channel, self.zero_point, self.lo, self.hi = per_channel, zero_point, lo, hi
        self.rounding = rounding

    def struct(self, first_channel=0):
        """The C struct, its arrays pointing at `first_channel` (a channel tile)."""
        c0 = first_channel if self.per_channel else 0
        return RequantT(ptr(self.mul[c0:], c_int32),
                        ptr(self.add[c0:], c_int32) if self.add is not None else None,
                        ptr(self.shift[c0:], c_int8), self.per_channel, self.zero_point,
                        self.lo, self.hi, ROUNDING_C[self.rounding], PlaneT(0, 0, 0), self.divisor)


@st.composite
def requants(draw, channels, acc_max, per_channel=None, mul_max=2**31 - 1, tflite=False):
    """Per-tensor or per-channel, any rounding (TFLite's with tflite=True:
    the reference kernels implement it, the other libraries leave it to them), with multipliers either
    anywhere (mostly saturating outputs) or scaled to acc_max so that outputs
    land inside [-128, 127] (the realistic case)."""
    if per_channel is None:
        per_channel = draw(st.booleans())
    n = channels if per_channel else 1
    scaled = draw(st.booleans())
    mul, shift = [], []
    for _ in range(n):
        if scaled:
            m = draw(st.integers(1, mul_max))
            bits = (max(acc_max, 1) * m).bit_length()
            s = max(0, min(62, bits - 7 + draw(st.integers(-2, 2))))
        else:
            m = draw(st.integers(0, mul_max))
            s = draw(st.integers(0, 40))
        mul.append(m)
        shift.append(s)
    add = draw(st.one_of(st.none(), st.lists(st.integers(-2**31, 2**31 - 1), min_size=n, max_size=n)))
    if add is not None and scaled:
        # keep add comparable to the product so the outputs stay in range
        add = [a >> max(0, 24 - s) for a, s in zip(add, shift)]
    lo = draw(st.integers(-128, 127))
    hi = draw(st.integers(lo, 127))
    if draw(st.booleans()):
        lo, hi = -128, 127
    roundings = ["half_up", "floor"]
    if tflite and acc_max < 2**31:
        roundings.append("tflite")   # TFLite's two roundings need int32 accumulators
    rounding = draw(st.sampled_from(roundings))
    divisor = None
    if rounding == "tflite":
        # no additive term; a left shift (shift < 31) only where acc << (31 - shift) stays int32
        add = None
        shift = [s if max(acc_max, 1) << max(0, 31 - s) < 2**31 else 31 for s in shift]
    if rounding == "floor" and draw(st.booleans()):
        # NEMO's division by 2**d - 1 (Requant.divisor), or any odd constant;
        # the shift gives up the divisor's bits so outputs stay in range
        d = draw(st.integers(2, 24))
        divisor = draw(st.sampled_from([2 ** d - 1, (2 ** d - 1) | 1 if d > 2 else 3, 2 ** (d - 1) + 1]))
        if scaled:
            shift = [max(0, v - divisor.bit_length() + 1) for v in shift]
    return Rq(mul, add, shift, int(per_channel), draw(st.integers(-128, 127)), lo, hi, rounding, divisor)


def int8s(rng, shape):
    return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)


def arrays(draw, shape):
    """int8 data from a seeded generator (hypothesis draws the seed: cheap to
    shrink, and extremes come from the shape and offset draws)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return int8s(rng, shape), rng


# ---- running a case ----------------------------------------------------------

class Case:
    """One kernel call: its function, how to build its argument struct around
    given output and scratch buffers, the expected output and the share of
    each core."""

    def __init__(self, fn, build, expected, out_dtype, share, scratch_bytes=0):
        self.fn, self.build, self.expected = fn, build, expected
        self.out_dtype, self.share, self.scratch_bytes = np.dtype(out_dtype), share, scratch_bytes


def rows_share(shape, core, ncores, axis_len=None):
    """Mask of output rows [core * ceil(h / n), ...) of an [h, ...] array."""
    h = shape[0] if axis_len is None else axis_len
    chunk = -(-h // ncores)
    mask = np.zeros(h, dtype=bool)
    mask[core * chunk:(core + 1) * chunk] = True
    return mask


def share_rows(shape, core, ncores):
    return np.broadcast_to(rows_share(shape, core, ncores).reshape(-1, *[1] * (len(shape) - 1)), shape)


def share_pixels(shape, core, ncores):
    h, w, c = shape
    m = rows_share(None, core, ncores, axis_len=h * w).reshape(h, w, 1)
    return np.broadcast_to(m, shape)


def share_channels(shape, core, ncores):
    return np.broadcast_to(rows_share(None, core, ncores, axis_len=shape[-1]), shape)


def share_flat(shape, core, ncores):
    return rows_share(None, core, ncores, axis_len=int(np.prod(shape))).reshape(shape)


def run_case(lib, case, ncores, rng):
    fn = getattr(lib, case.fn)
    expected = case.expected
    nbytes = expected.size * case.out_dtype.itemsize
    sb = case.scratch_bytes

    def call(cores, seed):
        poison = np.random.default_rng(seed).integers(0, 256, size=nbytes, dtype=np.uint8)
        out = poison.copy()
        spoison = np.random.default_rng(seed + 1).integers(0, 256, size=max(1, sb * ncores), dtype=np.uint8)
        scratch = spoison.copy()
        args, keep = case.build(out.ctypes.data, scratch.ctypes.data_as(POINTER(c_int8)) if sb else None)
        for k in cores:
            fn(ctypes.byref(args), k, ncores)
        del keep
        return out, poison, scratch, spoison

    # every core in turn on the same buffers: the union is the whole tile
    out, _, _, _ = call(range(ncores), int(rng.integers(2**31)))
    got = out.view(case.out_dtype).reshape(expected.shape)
    np.testing.assert_array_equal(got, expected)

    if ncores == 1:
        return
    # each core alone: exact on its share, nothing else written
    for k in range(ncores):
        out, poison, scratch, spoison = call([k], int(rng.integers(2**31)))
        mask = case.share(expected.shape, k, ncores)
        got = out.view(case.out_dtype).reshape(expected.shape)
        np.testing.assert_array_equal(got[mask], expected[mask], err_msg=f"core {k}/{ncores}")
        item = case.out_dtype.itemsize
        untouched = ~mask.reshape(-1)
        np.testing.assert_array_equal(out.reshape(-1, item)[untouched], poison.reshape(-1, item)[untouched],
                                      err_msg=f"core {k}/{ncores} wrote outside its share")
        if sb:
            own = np.zeros(sb * ncores, dtype=bool)
            own[k * sb:(k + 1) * sb] = True
            np.testing.assert_array_equal(scratch[~own], spoison[~own],
                                          err_msg=f"core {k}/{ncores} wrote another core's scratch")


def finish(acc, rq):
    """Expected output: requantized int8, or the int32 accumulator."""
    if rq is None:
        assert np.abs(acc).max(initial=0) < 2**31
        return acc.astype(np.int32), np.int32
    return ops.requantize(acc, rq.golden).astype(np.int8), np.int8


# ---- conv-like tiles -------------------------------------------------------

NCORES = st.sampled_from([1, 3, 8])
OFFSETS = st.integers(-127, 128)


@st.composite
def geometry(draw, max_k=5, max_hw=7, pad_max_is_k=True, pads=True):
    """Kernel, stride, input tile size and this tile's padding (any side,
    asymmetric, up to k or k-1), with at least one output pixel."""
    kh, kw = draw(st.integers(1, max_k)), draw(st.integers(1, max_k))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    extra = 0 if pad_max_is_k else -1
    if pads:
        pt, pb = draw(st.integers(0, kh + extra)), draw(st.integers(0, kh + extra))
        pl, pr = draw(st.integers(0, kw + extra)), draw(st.integers(0, kw + extra))
    else:
        pt = pb = pl = pr = 0
    in_h = draw(st.integers(max(1, kh - pt - pb), max_hw))
    in_w = draw(st.integers(max(1, kw - pl - pr), max_hw))
    out_h = (in_h + pt + pb - kh) // sh + 1
    out_w = (in_w + pl + pr - kw) // sw + 1
    return dict(kh=kh, kw=kw, sh=sh, sw=sw, pad=(pt, pl, pb, pr), in_h=in_h, in_w=in_w,
                out_h=out_h, out_w=out_w)


def conv_struct(x, w, bias, out_ptr, out_shape, g, off, rq_struct, scratch, scratch_bytes):
    pt, pl, pb, pr = g["pad"]
    return ConvArgs(ptr(x, c_int8), x.shape[0], x.shape[1], x.shape[2],
                    ptr(w, c_int8), ptr(bias, c_int32), out_ptr,
                    out_shape[0], out_shape[1], out_shape[2],
                    g["kh"], g["kw"], g["sh"], g["sw"], pt, pl, pb, pr, off,
                    ctypes.pointer(rq_struct) if rq_struct is not None else None,
                    scratch, scratch_bytes)


def conv_builder(x, w, bias, out_shape, g, off, rq, scratch_bytes=0, first_channel=0):
    """build(out_ptr, scratch) for a conv-like tile; w and bias may be views
    into larger arrays (channel tiles)."""
    x = np.ascontiguousarray(x)

    def build(out_ptr, scratch):
        rqs = rq.struct(first_channel) if rq is not None else None
        args = conv_struct(x, w, bias, out_ptr, out_shape, g, off, rqs, scratch, scratch_bytes)
        return args, (x, w, bias, rq, rqs)
    return build


def draw_bias(draw, rng, n):
    if draw(st.booleans()):
        return None
    return rng.integers(-2**20, 2**20, size=n).astype(np.int32)


def draw_rq(draw, acc, channels, tflite=False, **kw):
    if draw(st.integers(0, 3)) == 0:
        return None      # int32 accumulator output
    return draw(requants(channels, int(np.abs(acc).max(initial=0)), **kw, tflite=tflite))


# Each case strategy below also draws the tiles of the PULP-NN-style kernels
# (test_pulp_nn_kernels.py): `prefix` names the library's functions, `share`
# its work split, `offsets` the input offsets worth drawing for it, and the
# max_* bounds the tile sizes.

@st.composite
def conv_cases(draw, prefix="tsr_", share=share_rows, max_in_c=6, max_out_c=9, offsets=OFFSETS):
    g = draw(geometry())
    in_c, out_c = draw(st.integers(1, max_in_c)), draw(st.integers(1, max_out_c))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], in_c))
    w = int8s(rng, (out_c, g["kh"], g["kw"], in_c))
    bias = draw_bias(draw, rng, out_c)
    off = draw(offsets)
    acc = ops.conv2d(x, w, bias, off, (g["kh"], g["kw"]), (g["sh"], g["sw"]), g["pad"])
    assert acc.shape == (g["out_h"], g["out_w"], out_c)
    rq = draw_rq(draw, acc, out_c, tflite=True)
    expected, dtype = finish(acc, rq)
    patch = g["kh"] * g["kw"] * in_c
    # no scratch, too small for two pixels (direct loop), exactly two, more
    sb = draw(st.sampled_from([0, 2 * patch - 1, 2 * patch, 2 * patch + 13]))
    build = conv_builder(x, w, bias, expected.shape, g, off, rq, sb)
    return Case(prefix + "conv2d", build, expected, dtype, share, sb), draw(NCORES), rng


@given(conv_cases())
@SETTINGS
def test_conv2d_matches_golden(lib, case):
    run_case(lib, *case)


def unneeded_scratch(g, out_h):
    """The reference depthwise needs no scratch; passing some must not
    change anything."""
    return [0, g["kh"] * g["kw"]]


@st.composite
def depthwise_cases(draw, prefix="tsr_", share=share_rows, max_c=9, offsets=OFFSETS, scratch=unneeded_scratch,
                    geometries=None):
    """`scratch(g, out_h)` lists the per-core scratch sizes worth drawing;
    `geometries` fixes the window (kh, kw, sh, sw, pad; the tile drawn)."""
    if geometries is None:
        g = draw(geometry())
    else:
        w = draw(geometries)
        g = dict(w, in_h=draw(st.integers(1, 7)), in_w=draw(st.integers(1, 7)))
        g["out_h"] = (g["in_h"] + w["pad"][0] + w["pad"][2] - w["kh"]) // w["sh"] + 1
        g["out_w"] = (g["in_w"] + w["pad"][1] + w["pad"][3] - w["kw"]) // w["sw"] + 1
    ch = draw(st.integers(1, max_c))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], ch))
    w = int8s(rng, (ch, g["kh"], g["kw"]))           # the kernel's [c][kh][kw]
    bias = draw_bias(draw, rng, ch)
    off = draw(offsets)
    acc = ops.depthwise(x, w.transpose(1, 2, 0), bias, off, (g["kh"], g["kw"]),
                        (g["sh"], g["sw"]), g["pad"])
    rq = draw_rq(draw, acc, ch, tflite=True)
    expected, dtype = finish(acc, rq)
    sb = draw(st.sampled_from(scratch(g, expected.shape[0])))
    build = conv_builder(x, w, bias, expected.shape, g, off, rq, sb)
    if getattr(share, "by_geometry", False):    # a split that depends on the window (pnn_depthwise's 1x1)
        share = share(g)
    return Case(prefix + "depthwise", build, expected, dtype, share, sb), draw(NCORES), rng


@given(depthwise_cases())
@SETTINGS
def test_depthwise_matches_golden(lib, case):
    run_case(lib, *case)


ONE = dict(kh=1, kw=1, sh=1, sw=1, pad=(0, 0, 0, 0))


@st.composite
def pointwise_cases(draw, prefix="tsr_", share=share_pixels, max_h=6, in_cs=st.integers(1, 20), max_out_c=20,
                    offsets=OFFSETS):
    h, wd = draw(st.integers(1, max_h)), draw(st.integers(1, 6))
    in_c, out_c = draw(in_cs), draw(st.integers(1, max_out_c))
    x, rng = arrays(draw, (h, wd, in_c))
    w = int8s(rng, (out_c, in_c))
    bias = draw_bias(draw, rng, out_c)
    off = draw(offsets)
    acc = ops.pointwise(x, w, bias, off)
    rq = draw_rq(draw, acc, out_c, tflite=True)
    expected, dtype = finish(acc, rq)
    build = conv_builder(x, w, bias, expected.shape, ONE, off, rq)
    return Case(prefix + "pointwise", build, expected, dtype, share), draw(NCORES), rng


@given(pointwise_cases())
@SETTINGS
def test_pointwise_matches_golden(lib, case):
    run_case(lib, *case)


@st.composite
def linear_cases(draw, prefix="tsr_", share=share_channels, in_cs=st.integers(1, 16), max_out_c=24,
                 offsets=OFFSETS):
    h, wd, in_c = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(in_cs)
    out_c = draw(st.integers(1, max_out_c))
    x, rng = arrays(draw, (h, wd, in_c))
    w = int8s(rng, (out_c, h * wd * in_c))
    bias = draw_bias(draw, rng, out_c)
    off = draw(offsets)
    acc = ops.linear(x, w, bias, off)
    rq = draw_rq(draw, acc, out_c, tflite=True)
    expected, dtype = finish(acc, rq)
    g = dict(ONE, kh=h, kw=wd)     # linear reads neither; pass something plausible
    build = conv_builder(x, w, bias, expected.shape, g, off, rq)
    return Case(prefix + "linear", build, expected, dtype, share), draw(NCORES), rng


@given(linear_cases())
@SETTINGS
def test_linear_matches_golden(lib, case):
    run_case(lib, *case)


# ---- pools and add ---------------------------------------------------------

def pool_builder(x, out_shape, g, off, rq):
    x = np.ascontiguousarray(x)
    pt, pl, pb, pr = g["pad"]

    def build(out_ptr, scratch):
        rqs = rq.struct() if rq is not None else None
        args = PoolArgs(ptr(x, c_int8), x.shape[0], x.shape[1], x.shape[2],
                        ctypes.cast(out_ptr, POINTER(c_int8)), out_shape[0], out_shape[1],
                        g["kh"], g["kw"], g["sh"], g["sw"], pt, pl, pb, pr, off,
                        ctypes.pointer(rqs) if rqs is not None else None)
        return args, (x, rq, rqs)
    return build


@st.composite
def maxpool_cases(draw, prefix="tsr_", share=share_rows, max_c=9):
    # padding at most k-1 per side: every window holds an input
    g = draw(geometry(pad_max_is_k=False))
    ch = draw(st.integers(1, max_c))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], ch))
    expected = ops.maxpool(x, (g["kh"], g["kw"]), (g["sh"], g["sw"]), g["pad"]).astype(np.int8)
    build = pool_builder(x, expected.shape, g, draw(OFFSETS), None)
    return Case(prefix + "maxpool", build, expected, np.int8, share), draw(NCORES), rng


@given(maxpool_cases())
@SETTINGS
def test_maxpool_matches_golden(lib, case):
    run_case(lib, *case)


@st.composite
def avgpool_cases(draw, prefix="tsr_", share=share_rows, max_c=9):
    g = draw(geometry(pads=False))
    ch = draw(st.integers(1, max_c))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], ch))
    off = draw(OFFSETS)
    acc = ops.avgpool_sum(x, off, (g["kh"], g["kw"]), (g["sh"], g["sw"]))
    rq = draw(requants(ch, int(np.abs(acc).max(initial=0)), tflite=True))
    expected, dtype = finish(acc, rq)
    build = pool_builder(x, expected.shape, g, off, rq)
    return Case(prefix + "avgpool", build, expected, dtype, share), draw(NCORES), rng


@given(avgpool_cases())
@SETTINGS
def test_avgpool_matches_golden(lib, case):
    run_case(lib, *case)


def add_builder(a, b, in_mul, in_offset, rq, in_shift=(0, 0)):
    def build(out_ptr, scratch):
        rqs = rq.struct() if rq is not None else None
        args = AddArgs(ptr(a, c_int8), ptr(b, c_int8), out_ptr, a.size,
                       (c_int32 * 2)(*in_mul), (c_int32 * 2)(*in_offset), (c_int32 * 2)(*in_shift),
                       ctypes.pointer(rqs) if rqs is not None else None)
        return args, (a, b, rq, rqs)
    return build


@st.composite
def add_cases(draw, prefix="tsr_", share=share_flat, kinds=("frontend", "wild", "int32")):
    shape = (draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 8)))
    a, rng = arrays(draw, shape)
    b = int8s(rng, shape)
    in_offset = [draw(OFFSETS), draw(OFFSETS)]
    kind = draw(st.sampled_from(kinds))
    if kind == "frontend":
        # what the frontend makes: in_mul up to 2**30 (a 64-bit accumulator),
        # the scale in the requantization's shift
        in_mul = [draw(st.integers(0, 2**30)), draw(st.integers(0, 2**30))]
        acc = ops.add(a, b, in_mul, in_offset)
        rq = draw(requants(1, int(np.abs(acc).max(initial=0)), per_channel=False, mul_max=2**20))
    elif kind == "wild":
        in_mul = [draw(st.integers(-2**15, 2**15)), draw(st.integers(-2**15, 2**15))]
        acc = ops.add(a, b, in_mul, in_offset)
        rq = draw(requants(1, int(np.abs(acc).max(initial=0)), per_channel=False))
    else:
        in_mul = [draw(st.integers(-2**21, 2**21)), draw(st.integers(-2**21, 2**21))]
        acc = ops.add(a, b, in_mul, in_offset)
        rq = None
    expected, dtype = finish(acc, rq)
    build = add_builder(a, b, in_mul, in_offset, rq)
    return Case(prefix + "add", build, expected, dtype, share), draw(NCORES), rng


@given(add_cases())
@SETTINGS
def test_add_matches_golden(lib, case):
    run_case(lib, *case)


# ---- fixed cases -------------------------------------------------------------

def test_add_64bit_accumulator(lib):
    # (127 + 128) * 2**30 does not fit in 32 bits; the frontend's adds look
    # like this (mul 1, the scale in shift 30)
    a = np.array([[[127, -128, 0, 5]]], dtype=np.int8)
    b = np.array([[[127, -128, 0, -5]]], dtype=np.int8)
    in_mul, in_offset = [2**30, 2**30 - 1], [128, -127]
    rq = Rq([1], [0], [30], 0, -3, -128, 127, "half_up")
    acc = ops.add(a, b, in_mul, in_offset)
    assert np.abs(acc).max() >= 2**31
    expected, dtype = finish(acc, rq)
    run_case(lib, Case("tsr_add", add_builder(a, b, in_mul, in_offset, rq), expected, dtype,
                       share_flat), 3, np.random.default_rng(0))


@pytest.mark.parametrize("off", [-128, 129, 300, -300])
def test_conv2d_offset_outside_int8_padding(lib, off):
    # the im2col path stores padding as int8 -off; offsets it cannot store
    # take the direct loop and are still exact
    rng = np.random.default_rng(1)
    g = dict(kh=3, kw=3, sh=1, sw=2, pad=(1, 2, 1, 0), in_h=5, in_w=6)
    x, w = int8s(rng, (5, 6, 3)), int8s(rng, (4, 3, 3, 3))
    acc = ops.conv2d(x, w, None, off, (3, 3), (1, 2), g["pad"])
    expected = acc.astype(np.int32)
    sb = 2 * 27
    run_case(lib, Case("tsr_conv2d", conv_builder(x, w, None, acc.shape, g, off, None, sb),
                       expected, np.int32, share_rows, sb), 3, rng)


def full_requant(rng, channels, acc):
    """A per-channel requant scaled to acc (outputs mostly in range)."""
    top = int(np.abs(acc).max()) or 1
    mul = rng.integers(2**30, 2**31 - 1, size=channels)
    shift = [min(62, (top * int(m)).bit_length() - 7) for m in mul]
    return Rq(mul.tolist(), rng.integers(-1000, 1000, size=channels).tolist(), shift, 1,
              int(rng.integers(-128, 128)), -100, 120, "half_up")


def channel_tile(rng, op, g, in_shape, co_total, c0, tc, off):
    """Channels [c0, c0 + tc) of a layer with co_total output channels and
    per-channel parameters, on an input of in_shape (h, w, c; a depthwise
    has co_total channels): the tile's input, weights and bias (views into
    the layer's, at the tile's first channel), the layer's requantization,
    and the tile's accumulator and expected int8 output."""
    h, w_, in_c = in_shape
    x_full = int8s(rng, (h, w_, co_total if op == "depthwise" else in_c))
    bias = rng.integers(-5000, 5000, size=co_total).astype(np.int32)
    kern, strd = (g["kh"], g["kw"]), (g["sh"], g["sw"])
    x = x_full
    if op == "conv2d":
        w = int8s(rng, (co_total, g["kh"], g["kw"], in_c))
        acc = ops.conv2d(x_full, w, bias, off, kern, strd, g["pad"])
    elif op == "depthwise":
        w = int8s(rng, (co_total, g["kh"], g["kw"]))
        acc = ops.depthwise(x_full, w.transpose(1, 2, 0), bias, off, kern, strd, g["pad"])
        x = x_full[:, :, c0:c0 + tc]    # the input tile holds the tile's channels only
    elif op == "pointwise":
        w = int8s(rng, (co_total, in_c))
        acc = ops.pointwise(x_full, w, bias, off)
    else:
        w = int8s(rng, (co_total, x_full.size))
        acc = ops.linear(x_full, w, bias, off)
    rq = full_requant(rng, co_total, acc)
    expected = ops.requantize(acc, rq.golden).astype(np.int8)[:, :, c0:c0 + tc]
    assert len(np.unique(expected)) > min(10, expected.size // 2)   # the check means something
    return x, w[c0:], bias[c0:], rq, acc[:, :, c0:c0 + tc], expected


@pytest.mark.parametrize("op", ["conv2d", "depthwise", "pointwise", "linear"])
@pytest.mark.parametrize("ncores", [1, 3])
def test_channel_tile_of_larger_weights(lib, op, ncores):
    """A channel tile: weights, bias and requant arrays point into the
    layer's arrays at the tile's first channel; channel c of the tile is
    channel c0 + c of the layer."""
    rng = np.random.default_rng(7)
    c0, off = 6, 17
    g = dict(ONE) if op == "pointwise" else dict(kh=3, kw=2, sh=2, sw=1, pad=(1, 0, 0, 1))
    x, w, bias, rq, acc, expected = channel_tile(rng, op, g, (7, 5, 5), 23, c0, 9, off)
    share = {"conv2d": share_rows, "depthwise": share_rows,
             "pointwise": share_pixels, "linear": share_channels}[op]
    sb = 2 * 3 * 2 * 5 if op == "conv2d" else 0
    build = conv_builder(x, w, bias, expected.shape, g, off, rq, sb, first_channel=c0)
    run_case(lib, Case("tsr_" + op, build, expected, np.int8, share, sb), ncores, rng)
    # and int32 output of the same tile
    build = conv_builder(x, w, bias, expected.shape, g, off, None, sb)
    run_case(lib, Case("tsr_" + op, build, acc.astype(np.int32), np.int32, share, sb), ncores, rng)


# ---- tiles put together: a whole padded layer ------------------------------

def tile_input(o0, o1, stride, k, pad_before, n_in):
    """Input range [i0, i1) that output range [o0, o1) reads, and the tile's
    own padding before and after it."""
    start = o0 * stride - pad_before
    end = (o1 - 1) * stride - pad_before + k
    return max(start, 0), min(end, n_in), max(0, -start), max(0, end - n_in)


@st.composite
def tiled_layers(draw, max_c=6, channel_tiles=False, offsets=OFFSETS):
    """A padded layer and its output tile (th x tw pixels and, with
    channel_tiles, tc channels)."""
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pad = (draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)),
           draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)))
    h = draw(st.integers(max(1, kh - pad[0] - pad[2]), 12))
    w = draw(st.integers(max(1, kw - pad[1] - pad[3]), 12))
    c = draw(st.integers(1, max_c))
    ho, wo = (h + pad[0] + pad[2] - kh) // sh + 1, (w + pad[1] + pad[3] - kw) // sw + 1
    th, tw = draw(st.integers(1, ho)), draw(st.integers(1, wo))
    tile = dict(tc=draw(st.integers(1, max_c))) if channel_tiles else {}
    return dict(kh=kh, kw=kw, sh=sh, sw=sw, pad=pad, h=h, w=w, c=c, ho=ho, wo=wo, th=th, tw=tw, **tile,
                seed=draw(st.integers(0, 2**32 - 1)), off=draw(offsets), ncores=draw(NCORES))


def run_tiled(lib, op, L, prefix="tsr_", scratch_bytes=None):
    """Run the layer tile by tile (tiles of th x tw output pixels and, where
    L has tc, tc channels, each with its own slice of the input and its own
    padding) into one output. scratch_bytes(g, out_rows) is a core's scratch
    for a tile (default: two im2col patches of the whole input)."""
    rng = np.random.default_rng(L["seed"])
    c = L["c"]
    x = int8s(rng, (L["h"], L["w"], c))
    kern, strd = (L["kh"], L["kw"]), (L["sh"], L["sw"])
    if op == "conv2d":
        co = c + 2
        w = int8s(rng, (co, L["kh"], L["kw"], c))
        acc = ops.conv2d(x, w, None, L["off"], kern, strd, L["pad"])
    elif op == "depthwise":
        co = c
        w = int8s(rng, (c, L["kh"], L["kw"]))
        acc = ops.depthwise(x, w.transpose(1, 2, 0), None, L["off"], kern, strd, L["pad"])
    else:
        co = c
        acc = ops.maxpool(x, kern, strd, L["pad"])
    if op == "maxpool":
        rq, expected = None, acc.astype(np.int8)
    else:
        rq = full_requant(rng, co, acc)
        expected = ops.requantize(acc, rq.golden).astype(np.int8)
    got = np.zeros_like(expected)
    ncores = L["ncores"]
    fn = getattr(lib, prefix + op)
    tc = L.get("tc", co)
    for c0 in range(0, co, tc):
        c1 = min(c0 + tc, co)
        xc = x if op == "conv2d" else x[:, :, c0:c1]     # a conv reads every input channel
        for oy0 in range(0, L["ho"], L["th"]):
            oy1 = min(oy0 + L["th"], L["ho"])
            y0, y1, pt, pb = tile_input(oy0, oy1, L["sh"], L["kh"], L["pad"][0], L["h"])
            for ox0 in range(0, L["wo"], L["tw"]):
                ox1 = min(ox0 + L["tw"], L["wo"])
                x0, x1, pl, pr = tile_input(ox0, ox1, L["sw"], L["kw"], L["pad"][1], L["w"])
                g = dict(kh=L["kh"], kw=L["kw"], sh=L["sh"], sw=L["sw"], pad=(pt, pl, pb, pr))
                xt = np.ascontiguousarray(xc[y0:y1, x0:x1])
                out = np.full((oy1 - oy0, ox1 - ox0, c1 - c0), 99, dtype=np.int8)
                sb = scratch_bytes(g, oy1 - oy0) if scratch_bytes else 2 * L["kh"] * L["kw"] * c
                scratch = np.zeros(sb * ncores, dtype=np.int8)
                if op == "maxpool":
                    args, keep = pool_builder(xt, out.shape, g, 0, None)(out.ctypes.data, None)
                else:
                    args, keep = conv_builder(xt, w[c0:], None, out.shape, g, L["off"], rq, sb,
                                              first_channel=c0)(out.ctypes.data, ptr(scratch, c_int8))
                for k in range(ncores):
                    fn(ctypes.byref(args), k, ncores)
                got[oy0:oy1, ox0:ox1, c0:c1] = out
    np.testing.assert_array_equal(got, expected)


@given(tiled_layers())
@settings(max_examples=60, deadline=None)
def test_tiled_layer_conv2d(lib, layer):
    run_tiled(lib, "conv2d", layer)


@given(tiled_layers())
@settings(max_examples=60, deadline=None)
def test_tiled_layer_depthwise(lib, layer):
    run_tiled(lib, "depthwise", layer)


@given(tiled_layers())
@settings(max_examples=60, deadline=None)
def test_tiled_layer_maxpool(lib, layer):
    run_tiled(lib, "maxpool", layer)


# ---- integer-dialect features: parameters per element, int32 inputs, matmul --

def planes(values, shape, channels):
    """Parameters shaped [h', w', c'] (c' 1 or channels) as the kernels read
    them: a plane [h'][w'] per channel, and its PlaneT (see kernels.h)."""
    h, w, _ = shape
    full = np.broadcast_to(np.asarray(values).reshape(shape), (h, w, channels))
    flat = np.ascontiguousarray(full.transpose(2, 0, 1)).reshape(-1)
    return flat, PlaneT(h * w, w if h > 1 else 0, 1 if w > 1 else 0)


class PlaneRq(Rq):
    """A requantization whose parameters vary along rows and/or columns
    (the IR's Requant.shape), as the golden Requant and as C planes."""

    def __init__(self, rng, shape, channels, acc, rounding, with_add):
        n = int(np.prod(shape))
        top = int(np.abs(acc).max(initial=0)) or 1
        mul = rng.integers(1, 2**20, size=n)
        shift = np.array([max(0, min(62, (top * int(m)).bit_length() - 7 + int(rng.integers(-1, 2))))
                          for m in mul])
        add = rng.integers(-2**20, 2**20, size=n) if with_add else np.zeros(n, np.int64)
        zp, lo, hi = int(rng.integers(-20, 20)), -128, 127
        self.golden = Requant(mul=mul.tolist(), add=add.tolist(), shift=shift.tolist(), rounding=rounding,
                              zero_point=zp, lo=lo, hi=hi, shape=list(shape))
        self.mul, self.elem = planes(mul, shape, channels)
        self.mul = self.mul.astype(np.int32)
        self.add = planes(add, shape, channels)[0].astype(np.int32) if with_add else None
        self.shift = planes(shift, shape, channels)[0].astype(np.int8)
        self.per_channel, self.zero_point, self.lo, self.hi, self.rounding = 1, zp, lo, hi, rounding
        self.divisor = 0

    def struct(self, first_channel=0):
        s = super().struct(0)
        s.elem = self.elem
        return s


def param_shape(draw, h, w, c):
    """[h', w', c'] varying along rows or columns (what Requant.shape holds)."""
    while True:
        shape = (draw(st.sampled_from([1, h])), draw(st.sampled_from([1, w])), draw(st.sampled_from([1, c])))
        if shape[0] * shape[1] > 1:
            return shape


@st.composite
def per_element_cases(draw):
    """pointwise, conv2d and depthwise tiles with a bias per element (a
    Gemm's C matrix) and/or requantization parameters per row/column."""
    op = draw(st.sampled_from(["pointwise", "conv2d", "depthwise"]))
    g = draw(geometry()) if op != "pointwise" else dict(ONE, in_h=draw(st.integers(1, 6)), in_w=draw(st.integers(1, 6)))
    if op == "pointwise":
        g.update(out_h=g["in_h"], out_w=g["in_w"])
    in_c = draw(st.integers(1, 7))
    out_c = in_c if op == "depthwise" else draw(st.integers(1, 9))
    x, rng = arrays(draw, (g["in_h"], g["in_w"], in_c))
    off = draw(OFFSETS)
    kern, strd = (g["kh"], g["kw"]), (g["sh"], g["sw"])
    oh, ow = g["out_h"], g["out_w"]
    bias = rng.integers(-2**16, 2**16, size=(oh, ow, out_c)).astype(np.int32) if draw(st.booleans()) else None
    if op == "pointwise":
        w = int8s(rng, (out_c, in_c))
        acc = ops.pointwise(x, w, bias, off)
    elif op == "conv2d":
        w = int8s(rng, (out_c, g["kh"], g["kw"], in_c))
        acc = ops.conv2d(x, w, bias, off, kern, strd, g["pad"])
    else:
        w = int8s(rng, (out_c, g["kh"], g["kw"]))
        acc = ops.depthwise(x, w.transpose(1, 2, 0), bias, off, kern, strd, g["pad"])
    rq = None
    if bias is None or draw(st.booleans()):
        assume(oh * ow > 1)
        rq = PlaneRq(rng, param_shape(draw, oh, ow, out_c), out_c, acc,
                     draw(st.sampled_from(["half_up", "floor"])), draw(st.booleans()))
    expected, dtype = finish(acc, rq)
    sb = 2 * g["kh"] * g["kw"] * in_c if op == "conv2d" else 0
    bias_c, bias_elem = planes(bias, bias.shape, out_c) if bias is not None else (None, PlaneT())
    bias_c = bias_c.astype(np.int32) if bias is not None else None
    inner = conv_builder(x, w, bias_c, expected.shape, g, off, rq, sb)

    def build(out_ptr, scratch):
        args, keep = inner(out_ptr, scratch)
        args.bias_elem = bias_elem
        return args, keep
    share = share_pixels if op == "pointwise" else share_rows
    return Case("tsr_" + op, build, expected, dtype, share, sb), draw(NCORES), rng


@given(per_element_cases())
@SETTINGS
def test_parameters_per_element_match_golden(lib, case):
    run_case(lib, *case)


def int32s(rng, shape, bound=2**24):
    return rng.integers(-bound, bound, size=shape).astype(np.int32)


@st.composite
def int32_pool_cases(draw):
    """Pools reading int32 accumulators: max pooling (int32 out), a sum
    requantized (QuantLib's standalone RequantShift is a 1x1 avgpool) or
    left as the int32 sum."""
    op = draw(st.sampled_from(["maxpool", "avgpool"]))
    g = draw(geometry(pad_max_is_k=False, pads=op == "maxpool"))
    ch = draw(st.integers(1, 9))
    _, rng = arrays(draw, (1,))
    x = int32s(rng, (g["in_h"], g["in_w"], ch))
    kern, strd = (g["kh"], g["kw"]), (g["sh"], g["sw"])
    if op == "maxpool":
        expected, dtype, rq, off = ops.maxpool(x, kern, strd, g["pad"]).astype(np.int32), np.int32, None, 0
    else:
        off = 0
        acc = ops.avgpool_sum(x, off, kern, strd)
        rq = draw(st.one_of(st.none(), requants(ch, int(np.abs(acc).max(initial=0)), tflite=True)))
        expected, dtype = finish(acc, rq)
    inner = pool_builder(x.view(np.int8), expected.shape, g, off, rq)

    def build(out_ptr, scratch):
        args, keep = inner(out_ptr, scratch)
        args.in_h, args.in_w, args.c, args.in_int32 = x.shape[0], x.shape[1], x.shape[2], 1
        return args, keep
    return Case("tsr_" + op, build, expected, dtype, share_rows), draw(NCORES), rng


@given(int32_pool_cases())
@SETTINGS
def test_int32_input_pools_match_golden(lib, case):
    run_case(lib, *case)


@st.composite
def add_per_channel_cases(draw):
    """Adds of int8 or int32 tensors requantized per tensor, per channel or
    per element (out_w and out_c set), or kept as int32."""
    shape = (draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 6)))
    wide = draw(st.booleans())
    _, rng = arrays(draw, (1,))
    a, b = (int32s(rng, shape), int32s(rng, shape)) if wide else (int8s(rng, shape), int8s(rng, shape))
    in_mul = [draw(st.integers(-2**8, 2**8)), draw(st.integers(-2**8, 2**8))]
    in_offset = [0, 0] if wide else [draw(OFFSETS), draw(OFFSETS)]
    acc = ops.add(a, b, in_mul, in_offset)
    kind = draw(st.sampled_from(["channel", "element", "none"]))
    if kind == "channel":
        rq = draw(requants(shape[2], int(np.abs(acc).max(initial=0)), per_channel=True, mul_max=2**20))
    elif kind == "element":
        assume(shape[0] * shape[1] > 1)
        rq = PlaneRq(rng, param_shape(draw, *shape), shape[2], acc, "half_up", True)
    else:
        rq = None
        assume(np.abs(acc).max(initial=0) < 2**31)
    expected, dtype = finish(acc, rq)
    inner = add_builder(a.view(np.int8), b.view(np.int8), in_mul, in_offset, rq)

    def build(out_ptr, scratch):
        args, keep = inner(out_ptr, scratch)
        args.n, args.in_int32 = a.size, int(wide)
        if rq is not None:
            args.out_w, args.out_c = shape[1], shape[2]
        return args, keep
    return Case("tsr_add", build, expected, dtype, share_flat), draw(NCORES), rng


@given(add_per_channel_cases())
@SETTINGS
def test_add_int32_inputs_and_per_channel_requant_match_golden(lib, case):
    run_case(lib, *case)


@st.composite
def matmul_cases(draw):
    """Batched products of two activation tiles, the right operand per
    batch or one for all, [k][n] or transposed ([n][k], trans_b); requantized per channel, per batch (Deeploy's
    MatMul/Regular_RQ) or per element, or int32."""
    bt, m = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    k, n = draw(st.integers(1, 24)), draw(st.integers(1, 10))
    shared, trans_b = draw(st.booleans()), draw(st.booleans())
    a, rng = arrays(draw, (bt, m, k))
    b = int8s(rng, (1 if shared else bt, n, k) if trans_b else (1 if shared else bt, k, n))
    offs = [draw(OFFSETS), draw(OFFSETS)]
    acc = ops.matmul(a, b, offs, trans_b)
    kind = draw(st.sampled_from(["channel", "batch", "element", "none"]))
    if kind == "channel":
        rq = draw(requants(n, int(np.abs(acc).max(initial=0)), tflite=True))
    elif kind in ("batch", "element"):
        assume(bt > 1 or kind == "element" and m > 1)
        shape = (bt, 1, 1) if kind == "batch" else param_shape(draw, bt, m, n)
        rq = PlaneRq(rng, shape, n, acc, draw(st.sampled_from(["half_up", "floor"])), True)
    else:
        rq = None
    expected, dtype = finish(acc, rq)
    a_c, b_c = np.ascontiguousarray(a), np.ascontiguousarray(b)

    def build(out_ptr, scratch):
        rqs = rq.struct() if rq is not None else None
        args = MatmulArgs(ptr(a_c, c_int8), ptr(b_c, c_int8), out_ptr, bt, m, n, k,
                          0 if shared else k * n, offs[0], offs[1],
                          ctypes.pointer(rqs) if rqs is not None else None, int(trans_b))
        return args, (a_c, b_c, rq, rqs)
    return Case("tsr_matmul", build, expected, dtype, share_pixels), draw(NCORES), rng


@given(matmul_cases())
@SETTINGS
def test_matmul_matches_golden(lib, case):
    run_case(lib, *case)


def test_tflite_add_matches_golden(lib):
    """TFLite's ADD (inputs << 20, each rescaled by a doubling high multiply
    and a rounding shift, the sum requantized the same way) on every pair
    of int8 inputs: input multipliers 0.5 and ~0.177 (exponents 0 and -2),
    as TFLite's Prepare makes them from two input scales."""
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    in_mul, in_shift, in_offset = [1073741824, 1518500250], [31, 33], [5, -17]
    rq = Rq([1466505733], [0], [48], 0, -9, -128, 127, "tflite")
    acc = ops.add(a, b, in_mul, in_offset, in_shift)
    expected, dtype = finish(acc, rq)
    run_case(lib, Case("tsr_add", add_builder(a, b, in_mul, in_offset, rq, in_shift), expected, dtype, share_flat),
             2, np.random.default_rng(0))
