"""The GAP8 path under QEMU (targets/gap8.yaml, platform qemu_virt_rv32):
the cluster HAL on nine harts, PULP-NN-style kernels on one and on eight
harts, and whole networks bit-exact with weights streamed from L3.

Needs riscv64-unknown-elf-gcc with picolibc and qemu-system-riscv32; skips
with the apt-get line otherwise.
"""

import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from helpers import PNN_FALLBACK, hal_lines
from tessera import config
from tessera.codegen import linker
from tessera.golden import ops
from tessera.ir import Requant

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GAP8 = os.path.join(ROOT, "targets", "gap8.yaml")
HAL = os.path.join(ROOT, "kernels", "hal", "qemu_virt_rv32")
INCLUDE = os.path.join(ROOT, "kernels", "include")

pytestmark = pytest.mark.qemu


def _target():
    return config.load_target(GAP8, "gap8")


def _need_tools(target):
    missing = [p for p in (target["toolchain"]["cc"], target["runner"]["program"]) if shutil.which(p) is None]
    if missing:
        pkgs = " ".join(target["toolchain"]["debian"] + target["runner"]["debian"])
        pytest.skip(f"{', '.join(missing)} not installed (apt-get install {pkgs})")


def build_firmware(tmp, sources, target=None, defines=()):
    """Compile and link C sources with the GAP8 HAL, the target's flags and
    the linker script tessera generates for it; returns the ELF path."""
    from tessera_scons.platforms import qemu_virt_rv32 as plat

    target = target or _target()
    _need_tools(target)
    script = os.path.join(tmp, "link.ld")
    with open(script, "w") as f:
        f.write(linker.script(linker.view(target, plat.arch(target))))
    elf = os.path.join(tmp, "firmware.elf")
    tc = target["toolchain"]
    cmd = [tc["cc"], *tc["cflags"], "--specs=picolibc.specs", "--oslib=semihost", "--crt0=semihost",
           "-DPICOLIBC_INTEGER_PRINTF_SCANF", "-Wl,--no-warn-rwx-segments", "-Wall", "-Wextra", "-Werror",
           f"-DTSR_NCORES={target['cores']}", *[f"-D{d}" for d in defines], "-I", INCLUDE,
           "-T", script, os.path.join(HAL, "crt.S"), os.path.join(HAL, "hal.c"), *sources, "-o", elf]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stderr}"
    return elf


def run_firmware(elf, target=None, timeout=600, args=()):
    from tessera.runners import qemu

    target = target or _target()
    return qemu.run(target["runner"], elf, list(args), timeout)


# ---- the cluster HAL ---------------------------------------------------------

def test_cluster_hal_on_nine_harts(tmp_path):
    elf = build_firmware(str(tmp_path), [os.path.join(ROOT, "tests", "c", "hal_cluster_test.c")])
    text = run_firmware(elf)
    got = hal_lines(text)
    assert "done" in got, text
    n = int(got["cores"][0])
    assert n == 8
    # every core ran, on its own hart (1..8; hart 0 is the fabric controller)
    assert got["core_ids"] == [str(k + 1) for k in range(n)]
    assert got["harts"] == [str(k + 1) for k in range(n)]
    # a race is visible: without the barrier a core reads its neighbour's
    # slot before the neighbour's hart has written it ...
    assert got["without_barrier"] != [str(1000 + (k + 1) % n) for k in range(n)]
    # ... and the barrier orders the phases
    assert got["with_barrier"] == [str(1000 + (k + 1) % n) for k in range(n)]
    # per-core instruction counts follow the work (core k does k + 1 units)
    counts = [int(c) for c in got["core_counts"]]
    unit = counts[0]
    for k, c in enumerate(counts):
        assert abs(c - (k + 1) * unit) <= 64 * (k + 1), counts
    # DMA is asynchronous: nothing lands before the wait
    assert got["dma_before_wait"] == ["0"]
    assert got["dma_after_wait"] == [str(r * 8 + b) for r in range(8) for b in range(4)]
    assert got["dma_bytes"] == ["32"]


def test_cluster_hal_counts_are_deterministic(tmp_path):
    elf = build_firmware(str(tmp_path), [os.path.join(ROOT, "tests", "c", "hal_cluster_test.c")])
    assert run_firmware(elf) == run_firmware(elf)


# ---- PULP-NN-style kernels on one hart and on eight --------------------------

def _c_array(ctype, name, values, section=None):
    vals = ", ".join(str(int(v)) for v in np.asarray(values).reshape(-1))
    attr = f' __attribute__((aligned(4), section("{section}")))' if section else " __attribute__((aligned(4)))"
    return f"static {'' if section else 'const '}{ctype} {name}[{max(1, np.asarray(values).size)}]{attr} = {{{vals}}};"


def _requant(rng, acc, channels):
    """A per-channel requantization scaled to acc: most outputs in range."""
    top = int(np.abs(acc).max()) or 1
    mul = rng.integers(2**29, 2**31 - 1, size=channels)
    shift = np.array([min(62, (top * int(m)).bit_length() - 7) for m in mul])
    return Requant(mul=mul.tolist(), add=[0], shift=shift.tolist(), rounding="half_up",
                   zero_point=int(rng.integers(-20, 20)), lo=-128, hi=127)


def kernel_cases(seed=5):
    """One tile per kernel, each large enough to give all eight cores work:
    (name, C declarations, C setup of `args`, kernel, args type, expected)."""
    rng = np.random.default_rng(seed)
    i8 = lambda shape: rng.integers(-128, 128, size=shape).astype(np.int8)  # noqa: E731
    cases = []
    L1 = ".bss.tsr.L1"

    def conv_like(name, op, x, w, bias, kern, stride, pad, off, expected_acc, scratch, w_c=None):
        co = expected_acc.shape[2]
        rq = _requant(rng, expected_acc, co)
        expected = ops.requantize(expected_acc, rq).astype(np.int8)
        decl = [_c_array("int8_t", f"{name}_x", x), _c_array("int8_t", f"{name}_w", w if w_c is None else w_c),
                _c_array("int32_t", f"{name}_b", bias), _c_array("int32_t", f"{name}_mul", rq.mul),
                _c_array("int8_t", f"{name}_shift", rq.shift),
                _c_array("int8_t", f"{name}_out", np.zeros(expected.size), L1),
                _c_array("int8_t", f"{name}_scratch", np.zeros(max(1, scratch * 8)), L1),
                f"static const tsr_requant_t {name}_rq = {{{name}_mul, 0, {name}_shift, 1, {rq.zero_point}, "
                f"{rq.lo}, {rq.hi}, TSR_ROUND_HALF_UP, {{0, 0, 0}}, 0, 0, 0, 0, 0}};"]
        h, w_, c = x.shape
        oh, ow, _ = expected.shape
        setup = (f"static tsr_conv_args_t {name}_args = {{{name}_x, {h}, {w_}, {c}, {name}_w, {name}_b, {name}_out, "
                 f"{oh}, {ow}, {co}, {kern[0]}, {kern[1]}, {stride[0]}, {stride[1]}, {pad[0]}, {pad[1]}, {pad[2]}, "
                 f"{pad[3]}, {off}, &{name}_rq, {name}_scratch, {scratch}, {{0, 0, 0}}, 1, 1, 0}};")
        cases.append((name, decl + [setup], f"pnn_{op}", "tsr_conv_args_t", expected))

    x = i8((16, 12, 8))
    w = i8((20, 3, 3, 8))
    b = rng.integers(-3000, 3000, size=20).astype(np.int32)
    conv_like("conv", "conv2d", x, w, b, (3, 3), (1, 1), (1, 1, 1, 1), 128,
              ops.conv2d(x, w, b, 128, (3, 3), (1, 1), (1, 1, 1, 1)), 2 * 3 * 3 * 8)
    x = i8((13, 10, 24))
    w = i8((24, 3, 3))
    b = rng.integers(-3000, 3000, size=24).astype(np.int32)
    acc = ops.depthwise(x, w.transpose(1, 2, 0), b, 3, (3, 3), (2, 2), (1, 1, 0, 0))
    conv_like("dw", "depthwise", x, w, b, (3, 3), (2, 2), (1, 1, 0, 0), 3, acc,
              ((acc.shape[0] - 1) * 2 + 3) * 3)
    x = i8((4, 4, 64))
    w = i8((48, 64))
    b = rng.integers(-3000, 3000, size=48).astype(np.int32)
    conv_like("pw", "pointwise", x, w, b, (1, 1), (1, 1), (0, 0, 0, 0), 0, ops.pointwise(x, w, b, 0), 0)
    x = i8((2, 2, 32))
    w = i8((40, 128))
    b = rng.integers(-3000, 3000, size=40).astype(np.int32)
    conv_like("fc", "linear", x, w, b, (2, 2), (1, 1), (0, 0, 0, 0), -5, ops.linear(x, w, b, -5), 0)

    x = i8((10, 10, 16))
    expected = ops.maxpool(x, (3, 3), (2, 2), (1, 1, 1, 1)).astype(np.int8)
    decl = [_c_array("int8_t", "mp_x", x), _c_array("int8_t", "mp_out", np.zeros(expected.size), L1)]
    setup = (f"static tsr_pool_args_t mp_args = {{mp_x, 10, 10, 16, mp_out, {expected.shape[0]}, "
             f"{expected.shape[1]}, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0}};")
    cases.append(("mp", decl + [setup], "pnn_maxpool", "tsr_pool_args_t", expected))

    a, b2 = i8((8, 8, 16)), i8((8, 8, 16))
    in_mul, in_offset = [2**29, 2**28 + 7], [128, -3]
    acc = ops.add(a, b2, in_mul, in_offset)
    top = int(np.abs(acc).max())
    rq = Requant(mul=[1], add=[0], shift=[max(0, top.bit_length() - 7)], zero_point=-2)
    expected = ops.requantize(acc, rq).astype(np.int8)
    decl = [_c_array("int8_t", "add_a", a), _c_array("int8_t", "add_b", b2),
            _c_array("int8_t", "add_out", np.zeros(expected.size), L1),
            _c_array("int32_t", "add_mul", [1]), _c_array("int8_t", "add_shift", rq.shift),
            f"static const tsr_requant_t add_rq = {{add_mul, 0, add_shift, 0, {rq.zero_point}, -128, 127, "
            "TSR_ROUND_HALF_UP, {0, 0, 0}, 0, 0, 0, 0, 0};"]
    setup = (f"static tsr_add_args_t add_args = {{add_a, add_b, add_out, {a.size}, {{{in_mul[0]}, {in_mul[1]}}}, "
             f"{{{in_offset[0]}, {in_offset[1]}}}, {{0, 0}}, &add_rq, 0, 0, 0}};")
    cases.append(("add", decl + [setup], "pnn_add", "tsr_add_args_t", expected))
    return cases


def kernel_firmware_source(cases):
    out = ['#include <stdio.h>', '#include <stdint.h>', '#include "tessera/hal.h"', '#include "tessera/pulp_nn.h"']
    for name, decl, fn, args_t, _ in cases:
        out += decl
        out.append(f"static void {name}_run(void *a)\n{{\n    {fn}((const {args_t} *)a, hal_core_id(), "
                   "hal_num_cores());\n}")
    out.append("static void report(const char *name, const int8_t *p, int n, const uint64_t *before)\n{\n"
               "    int k;\n    printf(\"CASE %s out=\", name);\n"
               "    for (k = 0; k < n; k++)\n        printf(\"%02x\", (unsigned)(uint8_t)p[k]);\n"
               "    printf(\" cores=\");\n    for (k = 0; k < hal_num_cores(); k++)\n"
               "        printf(\"%s%lu\", k ? \",\" : \"\", (unsigned long)(hal_core_counts[k] - before[k]));\n"
               "    printf(\"\\n\");\n}")
    out.append("int main(void)\n{\n    uint64_t before[HAL_MAX_CORES];\n    int k;\n    hal_init();")
    for name, _, _, _, expected in cases:
        out.append(f"    for (k = 0; k < HAL_MAX_CORES; k++)\n        before[k] = hal_core_counts[k];\n"
                   f"    hal_fork({name}_run, &{name}_args);\n"
                   f"    report(\"{name}\", {name}_out, {expected.size}, before);")
    out.append('    printf("CASE done\\n");\n    return 0;\n}')
    return "\n".join(out) + "\n"


def run_kernel_firmware(tmp, cases, cores):
    target = _target()
    target = dict(target, cores=cores)
    src = os.path.join(tmp, f"kernels_{cores}.c")
    with open(src, "w") as f:
        f.write(kernel_firmware_source(cases))
    pnn = os.path.join(ROOT, "kernels", "pulp_nn")
    sources = [src] + sorted(os.path.join(pnn, f) for f in os.listdir(pnn) if f.endswith(".c")) + PNN_FALLBACK
    sub = os.path.join(tmp, f"c{cores}")
    os.makedirs(sub)
    text = run_firmware(build_firmware(sub, sources, target=target), target)
    got = {}
    for line in text.splitlines():
        m = re.match(r"CASE (\S+) out=([0-9a-f]*) cores=(\S+)", line.strip())
        if m:
            got[m.group(1)] = (bytes.fromhex(m.group(2)), [int(c) for c in m.group(3).split(",")])
    assert "CASE done" in text, text
    return got


def test_kernels_on_one_and_eight_harts(tmp_path):
    """Each kernel computes the same tile on one cluster core and on eight:
    identical outputs, equal to the golden model, and with eight cores
    every hart did part of the work (its own instruction count)."""
    cases = kernel_cases()
    one = run_kernel_firmware(str(tmp_path), cases, 1)
    eight = run_kernel_firmware(str(tmp_path), cases, 8)
    for name, _, _, _, expected in cases:
        want = expected.astype(np.int8).tobytes()
        assert one[name][0] == want, f"{name}: one core differs from the golden model"
        assert eight[name][0] == one[name][0], f"{name}: eight cores differ from one"
        counts = eight[name][1]
        assert len(counts) == 8 and all(c > 0 for c in counts), f"{name}: per-hart counts {counts}"
        # the work is split, not repeated: no hart does nearly all of it
        assert max(counts) < 0.5 * one[name][1][0], f"{name}: {counts} vs one core {one[name][1]}"


# ---- whole networks ---------------------------------------------------------------

def gap8_network(tmp_path, model):
    """Build, run and check `model` on gap8 with tessera's SCons; its report."""
    from helpers import scons

    _need_tools(_target())
    out = tmp_path / "out"
    # fusion=none: these tests check each layer's own DMA, weights and core
    # split (a fused step's counts are all on its first layer); the default
    # fusion on gap8 is checked by test_fusion_build.py and tools/fusion_check.py
    res = scons("target=gap8", f"model={model}", "fusion=none", out=out, timeout=3000)
    assert res.returncode == 0, f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    with open(out / "gap8" / model / "report.json") as f:
        return out / "gap8" / model, json.load(f)


def check_gap8_report(rep):
    assert rep["verdict"] == "pass"
    assert all(layer["match"] for layer in rep["layers"])
    assert rep["counts"]["method"] == "qemu-instructions"
    assert "not GAP8 cycles" in rep["counts"]["note"]
    tot = rep["totals"]
    # the whole run: every layer, plus the harness between them
    assert tot["instructions"] >= sum(layer["instructions"] for layer in rep["layers"]) > 0
    # weights come from L3, through L2, by the I/O DMA; tiles by the cluster DMA
    ws = tot["weights_streamed"]
    assert (ws["from"], ws["through"]) == ("L3", "L2")
    spilled = rep["memory"]["L3"].get("spilled_activations", 0)
    if spilled:   # tiles of activations moved to L3 take the I/O DMA too
        assert tot["dma_bytes"]["io_dma"] >= ws["bytes"] + 2 * spilled
        # the report's L3 activation traffic: every moved tensor written, then read
        st = tot["spill_traffic"]
        assert st["level"] == "L3" and st["written_bytes"] >= spilled and st["read_bytes"] >= spilled
        assert tot["dma_bytes"]["io_dma"] >= st["read_bytes"] + st["written_bytes"]
    else:
        assert tot["dma_bytes"]["io_dma"] == ws["bytes"]
    weighted = [layer for layer in rep["layers"] if layer["op"] in ("conv2d", "pointwise", "depthwise", "linear")]
    assert all(layer["weights_streamed"]["bytes"] > 0 for layer in weighted)
    assert all(layer["dma_bytes"]["cluster_dma"] > 0 for layer in rep["layers"])
    assert all(layer["l1_bytes"] <= layer["l1_budget"] for layer in rep["layers"])
    # the build's outputs hold no per-core split (see test_dscnn_kws_on_gap8)
    assert "core_counts" not in tot


def test_dscnn_kws_on_gap8(tmp_path):
    from tessera.check import runlog

    netdir, rep = gap8_network(tmp_path, "dscnn_kws")
    check_gap8_report(rep)
    # the counts do not depend on how QEMU interleaved the harts
    with open(netdir / "run.log") as f:
        first = f.read()
    assert run_firmware(str(netdir / "firmware.elf")) == first
    # asked for, the firmware prints how the eight cores shared each layer
    profile = runlog.parse(run_firmware(str(netdir / "firmware.elf"), args=["cores"]), "profile run")
    assert [layer["count"] for layer in profile["layers"]] == [layer["instructions"] for layer in rep["layers"]]
    for layer, counted in zip(rep["layers"], profile["layers"]):
        assert len(counted["cores"]) == 8
        assert sum(counted["cores"]) + counted["dma_count"] < counted["count"]
        if layer["op"] in ("conv2d", "pointwise", "depthwise"):
            assert min(counted["cores"]) > 0, (layer["name"], counted["cores"])


@pytest.mark.slow
def test_mbv1_128_on_gap8(tmp_path):
    _, rep = gap8_network(tmp_path, "mbv1_128")
    check_gap8_report(rep)
    by = {layer["name"]: layer for layer in rep["layers"]}
    # 1 MB of pw13 weights cannot sit in L2: cut over output channels (DORY's L3 tiling)
    assert by["pw13"]["weights_streamed"]["chunks"] > 1
    assert by["conv0"]["weights_streamed"]["chunks"] == 1
    assert rep["totals"]["weights_streamed"]["bytes"] > 4_000_000


@pytest.mark.slow
def test_mbv2_128_on_gap8(tmp_path):
    _, rep = gap8_network(tmp_path, "mbv2_128")
    check_gap8_report(rep)
    assert any(layer["op"] == "add" for layer in rep["layers"])
