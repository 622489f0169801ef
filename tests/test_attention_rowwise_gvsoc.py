"""Attention's row-wise kernels on GVSoC's pulp-open cluster: pnn_softmax,
pnn_layernorm and pnn_lut (kernels/pulp_nn/rowwise.c, Xpulpv2 as
targets/pulp_open.yaml builds them) against the golden model bit for bit,
on the keyword transformer's shapes (softmax 4 heads x 49 x 49, layer
norm 49 x 64, GELU's table 49 x 128), the tiny ViT's, Deeploy's forms
(iSoftmax, ITAMax, ITAPartialMax, iLayerNorm) and a row the 32-bit paths
hand to the reference (a softmax sum past 32 bits); and pnn_transpose
(kernels/pulp_nn/movement.c) on the transformers' transposes (K^T, head
split, [H,T,D] -> [H,D,T]), odd edges and a perm it hands to the reference
loop. One firmware runs each call on 8 cores with the reference kernel
(tsr_softmax, tsr_layernorm, tsr_lut, tsr_transpose) on the same data in
the same run: `rowwise_cycles` below gives
benchmarks/attention.py the cycles of both. The operands and per-value
constants sit in L1 as a generated layer puts them (a lookup table in L2).

Needs GVSoC and riscv64-unknown-elf-gcc with picolibc; skips otherwise.
"""

import os

import numpy as np
import pytest

from helpers import ROOT
from tessera.frontend.tables import layernorm_params, softmax_params
from tessera.golden import ops
from tessera.ir import Requant
from test_attention_gvsoc import c_array, parse
from test_gvsoc import GVSOC_MARKS, _target, build_firmware
from test_pulp_nn_gvsoc import MAIN_HEAD

pytestmark = GVSOC_MARKS

PNN = os.path.join(ROOT, "kernels", "pulp_nn")
REF = os.path.join(ROOT, "kernels", "reference")
KINDS = {"softmax": "tsr_softmax_args_t", "layernorm": "tsr_layernorm_args_t", "lut": "tsr_lut_args_t",
         "transpose": "tsr_transpose_args_t"}
# the optimized library's header, prefix, cores, and where the firmware's buffers go
LIBS = {"pnn": ("tessera/pulp_nn.h", "pnn_", 8, ' __attribute__((section(".bss.tsr.L1")))'),
        "cmsis": ("tessera/cmsis_nn.h", "tsr_cmsis_", 1, "")}
DEEPLOY = {"isoftmax": 1, "itamax": 2, "itapartialmax": 3}


def scores(rng, shape, spread):
    return np.clip(rng.normal(0, spread, size=shape), -128, 127).astype(np.int8)


def table_softmax(seed, shape, s_x, s_y, spread, name=""):
    rng = np.random.default_rng(seed)
    x = scores(rng, shape, spread)
    table, mul, shift = softmax_params(s_x, s_y, channels=shape[-1])
    rq = Requant(mul=[mul], add=[0], shift=[shift], zero_point=-128, lo=-128, hi=127)
    return dict(kind="softmax", x=x, expected=ops.softmax(x, table, rq).astype(np.int8), name=name,
                consts=[("int32_t", "table", table)],
                fields=[f"a.mul = {mul};", f"a.shift = {shift};", "a.zero_point = -128;", "a.lo = -128;",
                        "a.hi = 127;", "a.rounding = TSR_ROUND_HALF_UP;"])


def deeploy_softmax(seed, shape, mode, params, name=""):
    rng = np.random.default_rng(seed)
    x = scores(rng, shape, 30)
    return dict(kind="softmax", x=x, expected=ops.softmax(x, params, None, mode).astype(np.int8), name=name,
                consts=[], fields=[f"a.mode = {DEEPLOY[mode]};"] + [f"a.params[{i}] = {v};" for i, v in enumerate(params)])


def layernorm(seed, shape, off, name=""):
    rng = np.random.default_rng(seed)
    c = shape[-1]
    x = np.clip(rng.normal(0, 25, size=shape) + rng.integers(-10, 10, size=shape[:-1] + (1,)), -128, 127)
    x = x.astype(np.int8)
    e, mul, add, shift = layernorm_params(rng.normal(1, 0.3, c), rng.normal(0, 0.3, c), 1e-5, 0.04, 0.03, 2, c)
    rq = Requant(mul=mul, add=add, shift=shift, zero_point=2, lo=-128, hi=127)
    expected = ops.requantize(ops.layernorm(x, off, [e], None, "int"), rq).astype(np.int8)
    return dict(kind="layernorm", x=x, expected=expected, name=name,
                consts=[("int32_t", "mul", mul), ("int32_t", "add", add), ("int8_t", "shift", shift)],
                fields=[f"a.input_offset = {off};", "a.mode = TSR_LAYERNORM_INT;", f"a.eps = {e};",
                        "rq.per_channel = 1;", "rq.zero_point = 2;", "rq.lo = -128;", "rq.hi = 127;",
                        "rq.rounding = TSR_ROUND_HALF_UP;"])


def ilayernorm(seed, shape, name=""):
    rng = np.random.default_rng(seed)
    c = shape[-1]
    x = scores(rng, shape, 40)
    weight, bias = rng.integers(200000, 330000, size=c), rng.integers(-40000, 40000, size=c)
    rq = Requant(mul=[1], add=[0], shift=[16], rounding="floor", zero_point=0, lo=-128, hi=127)
    expected = ops.layernorm(x, 0, list(weight) + list(bias), rq, "ilayernorm").astype(np.int8)
    return dict(kind="layernorm", x=x, expected=expected, name=name,
                consts=[("int32_t", "weight", weight), ("int32_t", "bias", bias), ("int32_t", "mul", [1]),
                        ("int8_t", "shift", [16])],
                fields=["a.mode = TSR_LAYERNORM_DEEPLOY;", "rq.lo = -128;", "rq.hi = 127;"])


def lut(seed, shape, name=""):
    rng = np.random.default_rng(seed)
    x = scores(rng, shape, 50)
    table = rng.integers(-128, 128, size=256)
    return dict(kind="lut", x=x, expected=ops.lut(x, table[None, :]).astype(np.int8), name=name,
                consts=[("int8_t", "table", table)], fields=[])


def lut_clip(seed, shape, lo, hi, off_by_one=None, name=""):
    """A Clip's (or Relu's) table where it keeps the input's quantization:
    a clamp, which pnn_lut runs four values a word; with off_by_one, the
    same table with that entry changed (no longer a clamp: the table path)."""
    rng = np.random.default_rng(seed)
    x = scores(rng, shape, 60)
    table = np.clip(np.arange(-128, 128), lo, hi)
    if off_by_one is not None:
        table[off_by_one] += 1 if table[off_by_one] < 127 else -1
    return dict(kind="lut", x=x, expected=ops.lut(x, table[None, :]).astype(np.int8), name=name,
                consts=[("int8_t", "table", table)], fields=[])


def transpose(seed, shape, perm, name=""):
    """A transpose of `shape` by `perm` as the kernel sees it (config.views.transpose_view)."""
    x = scores(np.random.default_rng(seed), shape, 60)
    return dict(kind="transpose", x=x, expected=ops.transpose(x, perm).astype(np.int8), name=name, consts=[],
                fields=[f"a.in_h = {shape[0]};", f"a.in_w = {shape[1]};", f"a.in_c = {shape[2]};"]
                + [f"a.perm[{k}] = {p};" for k, p in enumerate(perm)])


CASES = [
    table_softmax(1, (4, 49, 49), 0.08, 1 / 256, 30, name="kws softmax"),
    layernorm(2, (1, 49, 64), 2, name="kws layernorm"),
    lut(3, (1, 49, 128), name="kws GELU table"),
    table_softmax(4, (3, 64, 64), 0.05, 1 / 256, 40, name="vit softmax"),
    layernorm(5, (1, 64, 64), -3, name="vit layernorm"),
    deeploy_softmax(6, (4, 66, 66), "isoftmax", [1, 345, 62395, 255, 256], name="iSoftmax"),
    deeploy_softmax(7, (1, 64, 64), "itamax", [256], name="ITAMax"),
    deeploy_softmax(8, (1, 64, 64), "itapartialmax", [16, 256], name="ITAPartialMax"),
    ilayernorm(9, (1, 64, 192), name="iLayerNorm"),
    table_softmax(10, (1, 3, 300), 0.001, 0.003, 0),     # sums past 32 bits: the reference's division
    layernorm(11, (1, 5, 7), 0),
    # a clip (ReLU6's clamp, whole words and rows off word alignment:
    # 131 values a row), tables one entry off a clamp (inside the range,
    # in the clamped part: the table path), the identity
    lut_clip(17, (1, 49, 128), -128, 40, name="clip table (a clamp)"),
    lut_clip(18, (1, 49, 131), -20, 100),
    lut_clip(19, (1, 49, 131), -20, 100, off_by_one=130),
    lut_clip(20, (1, 49, 128), -20, 100, off_by_one=50),
    lut_clip(21, (1, 49, 128), -128, 127, off_by_one=128),
    lut_clip(22, (1, 49, 128), -128, 127),
    transpose(12, (49, 1, 64), (2, 1, 0), name="kws K^T transpose"),
    transpose(13, (49, 4, 16), (1, 0, 2), name="kws head split"),
    transpose(14, (4, 49, 16), (0, 2, 1), name="head transpose [H,T,D]->[H,D,T]"),
    transpose(15, (65, 3, 66), (2, 0, 1)),             # the reference loop (rows' input step not 1)
    transpose(16, (7, 1, 13), (2, 1, 0)),              # odd edges only
]


def firmware_source(cases, lib="pnn"):
    """The firmware: each case on `lib`'s kernel, then on the reference's;
    its output and cycles (GVSoC) or instructions (QEMU) printed."""
    header, prefix, cores, where = LIBS[lib]
    out = ['#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n',
           f'#include "tessera/hal.h"\n#include "{header}"\n\n',
           f"static int8_t arena[60000]{where} __attribute__((aligned(8)));\n"
           f"static tsr_requant_t rq{where};\n"
           f"static int use_ref, ncores = {cores};\nstatic void (*volatile kernel)(const void *, int, int);\n"
           "static const void *kargs;\n\n"
           "static void body(void *unused)\n{\n    (void)unused;\n"
           "    if (hal_core_id() < ncores)\n        kernel(kargs, hal_core_id(), ncores);\n}\n\n"]
    for i, c in enumerate(cases):
        args_t, pnn, ref = KINDS[c["kind"]], prefix + c["kind"], "tsr_" + c["kind"]
        out.append(c_array(f"x{i}", "int8_t", c["x"]))
        for ctype, name, values in c["consts"]:
            out.append(c_array(f"{name}{i}", ctype, values))
        h, w, ch = c["x"].shape
        n = c["x"].nbytes
        lines = [f"static {args_t} args{i}{where};",
                 f"static uint32_t run{i}(void)\n{{", f"    {args_t} a = {{0}};", "    int8_t *p = arena;",
                 "    uint64_t t0;", f"    memcpy(p, x{i}, {n});", "    a.in = p;", f"    a.out = p + up4({n});",
                 f"    memset(a.out, 0x5A, {n});", f"    p += 2 * up4({n});",
                 "    memset(&rq, 0, sizeof rq);"]
        if c["kind"] != "transpose":        # a transpose's fields give its dims
            lines += [f"    a.pixels = {h * w};", f"    a.c = {ch};"]
        for ctype, name, values in c["consts"]:
            if c["kind"] == "lut":
                lines.append(f"    a.table = {name}{i};")        # in L2, as the generated code leaves it
                continue
            size = len(values) * (4 if ctype == "int32_t" else 1)
            lines += [f"    memcpy(p, {name}{i}, {size});"]
            target = {"table": "a.table", "weight": "a.weight", "bias": "a.bias"}.get(name, f"rq.{name}")
            lines += [f"    {target} = (const {ctype} *)p;", f"    p += up4({size});"]
        lines += ["    " + f for f in c["fields"]]
        if c["kind"] == "layernorm":
            lines.append("    a.rq = &rq;")
        lines += [f"    args{i} = a;", f"    kargs = &args{i};",
                  f"    kernel = (void (*)(const void *, int, int))(use_ref ? (void *){ref} : (void *){pnn});",
                  "    t0 = hal_counter();", "    hal_fork(body, 0);", "    t0 = hal_counter() - t0;",
                  f"    printf(\"CASE %s {i} \", use_ref ? \"ref\" : \"{lib}\");",
                  f"    for (j = 0; j < {n}; j++)", "        printf(\"%02x\", (unsigned)(uint8_t)a.out[j]);",
                  "    printf(\"\\n\");", "    return (uint32_t)t0;\n}\n"]
        lines.insert(2, "    int32_t j;")
        out.append("\n".join(lines) + "\n")
    out.append("static uint32_t up4(uint32_t n);\n")
    main = MAIN_HEAD + "    (void)i;\n    (void)j;\n    for (use_ref = 0; use_ref < 2; use_ref++) {\n"
    for i in range(len(cases)):
        main += (f"        printf(\"CYCLES %s {i} %u\\n\", use_ref ? \"ref\" : \"{lib}\", (unsigned)run{i}());\n")
    main += "    }\n    printf(\"CASES done\\n\");\n    return 0;\n}\n"
    # up4 is defined by MAIN_HEAD: declare it before the cases use it
    return out[0] + out[1] + "static uint32_t up4(uint32_t n);\n" + "".join(out[2:-1]) + main


def run_cases(tmp, cases=CASES):
    from tessera import config, runners

    target = _target()
    target["toolchain"]["cflags"] = list(target["toolchain"]["cflags"]) + [
        "-D" + d for d in config.isa_defines(target)]
    src = os.path.join(tmp, "cases.c")
    with open(src, "w") as f:
        f.write(firmware_source(cases))
    kernels = sorted(os.path.join(PNN, f) for f in os.listdir(PNN) if f.endswith(".c"))
    kernels += [os.path.join(REF, f) for f in ("attention.c", "elementwise.c", "movement.c")]
    elf = build_firmware(tmp, [src, *kernels], target)
    return parse(runners.run(target["runner"], elf))


def rowwise_cycles(tmp):
    """{case name: (values, cycles of the pulp_nn kernel, of the reference)}
    of the named cases on 8 cores, from one GVSoC run."""
    _, cycles = run_cases(str(tmp))
    return {c["name"]: (c["x"].size, cycles[("pnn", i)], cycles[("ref", i)]) for i, c in enumerate(CASES) if c["name"]}


@pytest.fixture(scope="module")
def xpulp(tmp_path_factory):
    return run_cases(str(tmp_path_factory.mktemp("rowwise_xpulp")))


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c["name"] or f"case{i}" for i, c in enumerate(CASES)])
def test_xpulp_rowwise_matches_golden(xpulp, i):
    got, _ = xpulp
    want = CASES[i]["expected"].tobytes()
    assert got[("pnn", i)] == want
    assert got[("ref", i)] == want          # the reference kernel in the same firmware
