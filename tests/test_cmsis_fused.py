"""The CMSIS-NN fused kernels (kernels/cmsis_nn/fused.c: tsr_cmsis_dw_pw,
tsr_cmsis_pw_dw, tsr_cmsis_pw_dw_rows) against the golden model's two layers run apart, bit for
bit, on random tiles: any depthwise geometry CMSIS-NN takes (kernel 1..5,
stride 1..2, padding below the kernel), both layers' requantizations drawn
independently (per channel or per tensor; CMSIS-NN's half up, TFLite's two
roundings or tessera's floor/additive forms, which fused.c runs on the
library's cores instead of CMSIS-NN's API), any block
size fd (rows for DW->PW and PW->DW row-wise, channels for PW->DW, so the
PW->DW copy of a compact output block into its channels runs too). The
row-wise PW->DW cases also run split into row bands as a fused step calls
them (each band its input rows, halo included, and its own top and bottom
padding; bands computed here from the geometry, not by the tiler).

Scratch and buffers are exactly what the fused tiler's `layers` scheme
reserves (fusion/tiler.py: the two layers' library.yaml scratch for every
channel; fd rows x Wo x C, or the word-aligned fd-channel intermediate plus
the depthwise's block). Both builds use TSR_CMSIS_STRICT, so a call the
CMSIS-NN path refused would leave its output uncomputed: every case runs the
CMSIS-NN path.

- on the host, through ctypes (the portable DSP equivalents), many cases;
- under QEMU on stm32h7's Cortex-M7 (marked qemu): the same kind of cases in
  one firmware with the real DSP instructions.
"""

import ctypes
from ctypes import POINTER, c_int, c_int8

import numpy as np
import pytest

from cmsis_cases import _bias, _channels, _geometry, _requant, _tflite_requant, golden_requant, scratch_bytes
from test_cmsis_nn import _c_array, harness_program, host_lib, run_harness  # noqa: F401
from test_ref_kernels import ROUNDING_C, ConvArgs, PlaneT, RequantT
from tessera.golden import ops


def _align4(n):
    return (n + 3) & ~3


class FusedCase:
    """One fused call: kind, both layers' arrays and fields, fd, the scratch
    and intermediate sizes, the expected output."""

    def __init__(self, kind, layers, fd, scratch, buf, expected):
        self.kind, self.layers, self.fd = kind, layers, fd
        self.scratch, self.buf, self.expected = scratch, buf, expected

    @property
    def fn(self):
        return f"tsr_cmsis_{self.kind}"

    @property
    def args(self):
        """The argument struct's kind (row-wise PW->DW takes pw_dw's)."""
        return self.kind.removesuffix("_rows")


def _layer(x, w, bias, g, off, rq, out_shape):
    return {"arrays": {"in": x, "weights": w, "bias": bias}, "rq": rq, "fields": {
        "in_h": x.shape[0], "in_w": x.shape[1], "in_c": x.shape[2], "out_h": out_shape[0], "out_w": out_shape[1],
        "out_c": out_shape[2], "kh": g["kh"], "kw": g["kw"], "sh": g["sh"], "sw": g["sw"], "pad_t": g["pad_t"],
        "pad_l": g["pad_l"], "pad_b": g["pad_b"], "pad_r": g["pad_r"], "input_offset": off}}


ONE = dict(kh=1, kw=1, sh=1, sw=1, pad_t=0, pad_l=0, pad_b=0, pad_r=0)


def _rq(rng, co, acc):
    """A layer's requantization: CMSIS-NN's half of the time, else TFLite's
    or tessera's floor/additive/divisor forms."""
    form, acc_max = int(rng.integers(4)), int(np.abs(acc).max(initial=0))
    if form == 2:
        return _tflite_requant(rng, co, acc_max)
    return _requant(rng, co, acc_max, cmsis=form != 3)


def _dw(rng, x, g):
    C = x.shape[2]
    w = rng.integers(-128, 128, size=(C, g["kh"], g["kw"])).astype(np.int8)
    b, off = _bias(rng, C), int(rng.integers(-127, 129))
    acc = ops.depthwise(x, w.transpose(1, 2, 0), b, off, (g["kh"], g["kw"]), (g["sh"], g["sw"]),
                        (g["pad_t"], g["pad_l"], g["pad_b"], g["pad_r"]))
    rq = _rq(rng, C, acc)
    return w, b, off, rq, golden_requant(acc, rq)


def _pw(rng, x, co):
    w = rng.integers(-128, 128, size=(co, x.shape[2])).astype(np.int8)
    b, off = _bias(rng, co), int(rng.integers(-127, 129))
    acc = ops.pointwise(x, w, b, off)
    rq = _rq(rng, co, acc)
    return w, b, off, rq, golden_requant(acc, rq)


def _scratch(C, Co, Ci, g):
    """The `layers` scheme's scratch: the depthwise's (C channels) and the
    pointwise's (Ci inputs, Co outputs) library.yaml terms."""
    area = g["kh"] * g["kw"]
    return (scratch_bytes("depthwise", kh=g["kh"], kw=g["kw"], kernel_area=area, patch=area * C, in_c=C, tile_c=C,
                           in_tile_w=g["in_w"], tile_h=g["out_h"], tile_w=g["out_w"])
            + scratch_bytes("pointwise", in_c=Ci, patch=Ci, tile_c=Co))


def dw_pw_case(rng, g=None, C=None, Co=None, fd=None):
    """A random DW->PW case (the arguments fix its geometry: benchmarks/cmsis_fused.py)."""
    g = g or _geometry(rng, max_hw=9)
    C, Co = C or _channels(rng, 20), Co or _channels(rng, 20)
    x = rng.integers(-128, 128, size=(g["in_h"], g["in_w"], C)).astype(np.int8)
    w1, b1, off1, rq1, mid = _dw(rng, x, g)
    w2, b2, off2, rq2, y = _pw(rng, mid, Co)
    fd = fd or int(rng.integers(1, g["out_h"] + 1))
    layers = [_layer(x, w1, b1, g, off1, rq1, mid.shape), _layer(mid, w2, b2, ONE, off2, rq2, y.shape)]
    return FusedCase("dw_pw", layers, fd, _scratch(C, Co, C, g), fd * g["out_w"] * C, y)


def pw_dw_case(rng, g=None, Ci=None, C=None, fd=None):
    """A random PW->DW case (the arguments fix its geometry)."""
    g = g or _geometry(rng, max_hw=9)
    Ci, C = Ci or _channels(rng, 20), C or _channels(rng, 20)
    x = rng.integers(-128, 128, size=(g["in_h"], g["in_w"], Ci)).astype(np.int8)
    w1, b1, off1, rq1, mid = _pw(rng, x, C)
    w2, b2, off2, rq2, y = _dw(rng, mid, g)
    fd = fd or int(rng.integers(1, C + 1))
    buf = g["in_h"] * g["in_w"] * fd
    if fd < C:
        buf = _align4(buf) + g["out_h"] * g["out_w"] * fd
    layers = [_layer(x, w1, b1, ONE, off1, rq1, mid.shape), _layer(mid, w2, b2, g, off2, rq2, y.shape)]
    return FusedCase("pw_dw", layers, fd, _scratch(C, C, Ci, g), buf, y)


def pw_dw_rows_case(rng, g=None, Ci=None, C=None, fd=None):
    """A random row-wise PW->DW case: fd depthwise output rows per block, the
    shifted buffer of (fd - 1) * sh + kh pointwise rows, the channel-wise
    step's scratch."""
    g = g or _geometry(rng, max_hw=11)
    Ci, C = Ci or _channels(rng, 20), C or _channels(rng, 20)
    x = rng.integers(-128, 128, size=(g["in_h"], g["in_w"], Ci)).astype(np.int8)
    w1, b1, off1, rq1, mid = _pw(rng, x, C)
    w2, b2, off2, rq2, y = _dw(rng, mid, g)
    fd = fd or int(rng.integers(1, g["out_h"] + 1))
    buf = ((fd - 1) * g["sh"] + g["kh"]) * g["in_w"] * C
    layers = [_layer(x, w1, b1, ONE, off1, rq1, mid.shape), _layer(mid, w2, b2, g, off2, rq2, y.shape)]
    return FusedCase("pw_dw_rows", layers, fd, _scratch(C, C, Ci, g), buf, y)


def in_bands(case, th):
    """A row-wise PW->DW case as bands of th output rows: per band the
    input rows its windows read (inside the map) and the padding left at
    its top and bottom, the expected rows sliced from the whole map's."""
    first, second = case.layers
    f = second["fields"]
    H, Ho = first["fields"]["in_h"], f["out_h"]
    parts = []
    for o0 in range(0, Ho, th):
        oh = min(th, Ho - o0)
        v0, v1 = o0 * f["sh"] - f["pad_t"], (o0 + oh - 1) * f["sh"] - f["pad_t"] + f["kh"] - 1
        i0, i1 = max(v0, 0), min(v1, H - 1)
        a = {**first, "arrays": {**first["arrays"], "in": first["arrays"]["in"][i0:i1 + 1]},
             "fields": {**first["fields"], "in_h": i1 - i0 + 1, "out_h": i1 - i0 + 1}}
        b = {**second, "fields": {**f, "in_h": i1 - i0 + 1, "out_h": oh, "pad_t": i0 - v0, "pad_b": v1 - i1}}
        parts.append(FusedCase(case.kind, [a, b], min(case.fd, oh), case.scratch, case.buf,
                               case.expected[o0:o0 + oh]))
    return parts


def rows_cases(count, seed):
    """Row-wise PW->DW cases, every other one split into bands (2 or more)."""
    rng = np.random.default_rng(seed)
    got = []
    for i in range(count):
        case = pw_dw_rows_case(rng)
        Ho = case.expected.shape[0]
        if i % 2 and Ho > 1:
            got += in_bands(case, int(rng.integers(1, Ho)))
        else:
            got.append(case)
    return got


def fused_cases(count, seed):
    rng = np.random.default_rng(seed)
    return [(dw_pw_case if i % 2 == 0 else pw_dw_case)(rng) for i in range(count)]


# ---- host --------------------------------------------------------------------

class FusedArgs(ctypes.Structure):
    # tsr_dw_pw_args_t {dw, pw, buf, fd} and tsr_pw_dw_args_t {pw, dw, buf, fd}: the first
    # layer first (tests/test_fusion_kernels.py pins both layouts)
    _fields_ = [("first", ConvArgs), ("second", ConvArgs), ("buf", POINTER(c_int8)), ("fd", ctypes.c_int32)]


def _rq_struct(rq, keep):
    mul, shift = np.array(rq["mul"], np.int32), np.array(rq["shift"], np.int8)
    add = np.array(rq["add"], np.int32) if any(rq["add"]) else None
    keep += [mul, shift, add]
    return RequantT(mul.ctypes.data_as(POINTER(ctypes.c_int32)),
                    add.ctypes.data_as(POINTER(ctypes.c_int32)) if add is not None else None,
                    shift.ctypes.data_as(POINTER(c_int8)), rq["per_channel"], rq["zero_point"], rq["lo"], rq["hi"],
                    ROUNDING_C[rq["rounding"]], PlaneT(0, 0, 0), rq.get("divisor", 0))


def run_host(lib, case):
    keep = []
    out = np.full(case.expected.size, 0x5A, dtype=np.int8)
    scratch = np.full(max(case.scratch, 1), 0xA5 - 256, dtype=np.int8)
    buf = np.full(max(case.buf, 1), 0x33, dtype=np.int8)
    structs = []
    for i, layer in enumerate(case.layers):
        a = {k: (np.ascontiguousarray(v) if v is not None else None) for k, v in layer["arrays"].items()}
        keep += list(a.values())
        rq = _rq_struct(layer["rq"], keep)
        keep.append(rq)
        f = layer["fields"]
        # the first layer's input is the tile's; the second's comes from the kernel's buffer
        x = a["in"].ctypes.data_as(POINTER(c_int8)) if i == 0 else None
        structs.append(ConvArgs(x, f["in_h"], f["in_w"], f["in_c"], a["weights"].ctypes.data_as(POINTER(c_int8)),
                                a["bias"].ctypes.data_as(POINTER(ctypes.c_int32)) if a["bias"] is not None else None,
                                out.ctypes.data if i == 1 else None, f["out_h"], f["out_w"], f["out_c"],
                                f["kh"], f["kw"], f["sh"], f["sw"], f["pad_t"], f["pad_l"], f["pad_b"], f["pad_r"],
                                f["input_offset"], ctypes.pointer(rq)))
    dw = structs[0] if case.kind == "dw_pw" else structs[1]
    dw.scratch = scratch.ctypes.data_as(POINTER(c_int8))
    dw.scratch_bytes = case.scratch
    args = FusedArgs(structs[0], structs[1], buf.ctypes.data_as(POINTER(c_int8)), case.fd)
    fn = getattr(lib, case.fn)
    fn.argtypes = [POINTER(FusedArgs), c_int, c_int]
    fn.restype = None
    fn(ctypes.byref(args), 0, 1)
    del keep
    return out.reshape(case.expected.shape)


def test_fused_kernels_match_two_layers_on_host(host_lib):
    rows = rows_cases(300, seed=13)
    # the row-wise cases cover stride 1 and 2 with several blocks (rows kept
    # and shifted), and maps split into bands (300 maps, more calls)
    dws = [(c.layers[1]["fields"], c.fd) for c in rows]
    assert {f["sh"] for f, fd in dws if fd < f["out_h"]} == {1, 2} and len(rows) > 300
    for i, case in enumerate(fused_cases(400, seed=11) + rows):
        got = run_host(host_lib, case)
        if not np.array_equal(got, case.expected):
            bad = np.argwhere(got != case.expected)[0]
            pytest.fail(f"{case.kind} case {i} (fd {case.fd}, {case.layers[0]['fields']}, "
                        f"{case.layers[1]['fields']}): first difference at {bad.tolist()}: "
                        f"kernel {got[tuple(bad)]} vs golden {case.expected[tuple(bad)]}")


# ---- under QEMU --------------------------------------------------------------

def harness_source(case_list):
    """A firmware main() running every fused case, printing run_harness's
    `TSR kcase <i> <kind> ok|bad ...` lines."""
    out_max = max(c.expected.size for c in case_list)
    src = ['#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n',
           '#include "tessera/cmsis_nn.h"\n#include "tessera/hal.h"\n',
           f"static int8_t out_buf[{out_max}] __attribute__((aligned(8)));",
           f"static int8_t scratch[{max(max(c.scratch for c in case_list), 4)}] __attribute__((aligned(8)));",
           f"static int8_t mid[{max(max(c.buf for c in case_list), 4)}] __attribute__((aligned(8)));",
           "static int failures;\n",
           """static void report(int i, const char *kind, const int8_t *want, uint32_t n, uint32_t count)
{
    uint32_t k = 0;
    while (k < n && out_buf[k] == want[k])
        k++;
    if (k < n) {
        failures++;
        printf("TSR kcase %d %s bad at=%lu got=%d want=%d\\n", i, kind, (unsigned long)k, out_buf[k], want[k]);
    } else {
        printf("TSR kcase %d %s ok count=%lu\\n", i, kind, (unsigned long)count);
    }
}
"""]
    for i, c in enumerate(case_list):
        body = [f"    tsr_{c.args}_args_t a;\n    memset(&a, 0, sizeof a);"]
        names = ("dw", "pw") if c.kind == "dw_pw" else ("pw", "dw")
        for j, (part, layer) in enumerate(zip(names, c.layers)):
            p = f"c{i}_{part}_"
            for name, arr in layer["arrays"].items():
                if arr is None or (name == "in" and j == 1):
                    continue
                src.append(_c_array(p + name, np.ascontiguousarray(arr).reshape(-1)))
                body.append(f"    a.{part}.{name} = {p}{name};")
            rq = layer["rq"]
            src.append(_c_array(p + "mul", np.array(rq["mul"], np.int32)))
            src.append(f"static const int8_t {p}shift[] = {{{', '.join(map(str, rq['shift']))}}};")
            add = "NULL"
            if any(rq["add"]):
                src.append(_c_array(p + "add", np.array(rq["add"], np.int32)))
                add = p + "add"
            body.append(f"    static const tsr_requant_t {part}_rq = {{.mul = {p}mul, .add = {add}, .shift = {p}shift, "
                        f".per_channel = {rq['per_channel']}, .zero_point = {rq['zero_point']}, .lo = {rq['lo']}, "
                        f".hi = {rq['hi']}, .rounding = {ROUNDING_C[rq['rounding']]}, "
                        f".divisor = {rq.get('divisor', 0)}}};")
            body.append(f"    a.{part}.rq = &{part}_rq;")
            body += [f"    a.{part}.{k} = {v};" for k, v in layer["fields"].items()]
        src.append(_c_array(f"c{i}_want", c.expected.reshape(-1)))
        body += [f"    a.{'pw' if c.kind == 'dw_pw' else 'dw'}.out = out_buf;",
                 f"    a.dw.scratch = scratch;\n    a.dw.scratch_bytes = {c.scratch};",
                 f"    a.buf = mid;\n    a.fd = {c.fd};",
                 f"    memset(out_buf, 0x5a, {c.expected.size});\n    memset(scratch, 0xa5, sizeof scratch);",
                 f"    uint64_t t = hal_counter();\n    {c.fn}(&a, 0, 1);\n    t = hal_counter() - t;",
                 f'    report({i}, "{c.kind}", c{i}_want, {c.expected.size}, (uint32_t)t);']
        src.append(f"static void case{i}(void)\n{{\n" + "\n".join(body) + "\n}\n")
    return harness_program(src, len(case_list))


@pytest.mark.qemu
def test_fused_kernels_match_two_layers_under_qemu(tmp_path):
    case_list = fused_cases(60, seed=12) + rows_cases(30, seed=14)
    results = run_harness(case_list, "stm32h7", tmp_path, source=harness_source(case_list))
    assert len(results) == len(case_list)
    bad = [line for _, ok, _, _, line in results.values() if not ok]
    assert not bad, "\n".join(bad[:10])
