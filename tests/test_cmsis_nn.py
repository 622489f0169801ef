"""The Cortex-M kernels (kernels/cmsis_nn/) against the golden model, bit
for bit, on random tiles (tests/cmsis_cases.py):

- on the host, through ctypes: the same C built with the portable
  equivalents of the DSP intrinsics (tsr_dsp.h), many cases, fast;
- under QEMU (marked qemu): the cases compiled into one firmware per core
  (Cortex-M7 on mps2-an500, Cortex-M4 on mps2-an386) with the real DSP
  instructions; the firmware compares every output itself.

Both build with TSR_CMSIS_STRICT: a tile the CMSIS-NN path refuses is left
uncomputed instead of falling back to the reference kernel, so every case
really runs the CMSIS-NN path. Also here: the claim that tessera's half-up
requantization is CMSIS-NN's single-rounding one.
"""

import ctypes
import os
import shutil
import subprocess
from ctypes import POINTER, c_int, c_int8, c_int32

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from cmsis_cases import KIND, OPS, PROBED, cases, make_case, probes
from test_ref_kernels import ROUNDING_C, AddArgs, ConvArgs, PlaneT, PoolArgs, RequantT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "kernels")
CMSIS = os.path.join(KERNELS, "cmsis_nn")
INCLUDES = [os.path.join(KERNELS, "include"), os.path.join(CMSIS, "include"), CMSIS]


def kernel_sources(checkout=None):
    """C files and include folders of the library: tessera's own CMSIS-NN
    API implementation, or ARM's from a checkout (as `cmsis_nn=<checkout>`
    builds it, see library.yaml's build.upstream)."""
    from cmsis_cases import LIBRARY

    up = LIBRARY["build"]["upstream"]
    dirs = [CMSIS, os.path.join(KERNELS, "reference")]
    includes = list(INCLUDES)
    if checkout:
        dirs += [os.path.join(checkout, d) for d in up["sources"]]
        includes = [INCLUDES[0], CMSIS] + [os.path.join(checkout, d) for d in up["include"]]
    else:
        dirs.append(os.path.join(CMSIS, "arm"))
    files = [os.path.join(d, f) for d in dirs for f in sorted(os.listdir(d))
             if f.endswith(".c") and not f.endswith(tuple(up["skip"]))]
    return files, includes


# ---- the requantization claim ------------------------------------------------

def cmsis_single_rounding(acc, mul, cmsis_shift):
    """arm_nn_requantize with CMSIS_NN_USE_SINGLE_ROUNDING (64-bit ints)."""
    total = 31 - cmsis_shift
    result = (acc * mul) >> (total - 1)
    return (result + 1) >> 1


@given(st.integers(-2**31, 2**31 - 1), st.integers(0, 2**31 - 1), st.integers(1, 62))
@settings(max_examples=2000, deadline=None)
def test_half_up_requantization_is_cmsis_single_rounding(acc, mul, s):
    tessera = (acc * mul + (1 << (s - 1))) >> s
    assert cmsis_single_rounding(acc, mul, 31 - s) == tessera
    if s >= 33:   # the kernels' short form (tsr_dsp.h): the high word of the product only
        assert (((acc * mul) >> 32) + (1 << (s - 33))) >> (s - 32) == tessera


# ---- host ------------------------------------------------------------------

@pytest.fixture(scope="session")
def host_lib(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no host gcc")
    so = tmp_path_factory.mktemp("cmsis") / "libtsr_cmsis.so"
    files, includes = kernel_sources()
    cmd = [gcc, "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-DTSR_CMSIS_STRICT",
           *[f"-I{d}" for d in includes], *files, "-o", str(so)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    lib = ctypes.CDLL(str(so))
    for op in OPS:
        fn = getattr(lib, "tsr_cmsis_" + ("add" if op == "add_tfl" else op))
        fn.argtypes = [ctypes.c_void_p, c_int, c_int]
        fn.restype = None
    return lib


def _ptr(arr, ctype):
    return arr.ctypes.data_as(POINTER(ctype)) if arr is not None else None


def run_host(lib, case):
    """The kernel's output for case (ctypes; arrays kept alive locally)."""
    keep = []

    def arr(name, dtype):
        a = case.arrays.get(name)
        if a is None:
            return None
        a = np.ascontiguousarray(a, dtype=dtype)
        keep.append(a)
        return a

    rq = None
    if case.rq is not None:
        mul, shift = np.array(case.rq["mul"], np.int32), np.array(case.rq["shift"], np.int8)
        add = np.array(case.rq["add"], np.int32) if any(case.rq["add"]) else None
        keep += [mul, shift, add]
        rq = RequantT(_ptr(mul, c_int32), _ptr(add, c_int32), _ptr(shift, c_int8), case.rq["per_channel"],
                      case.rq["zero_point"], case.rq["lo"], case.rq["hi"],
                      ROUNDING_C[case.rq["rounding"]], PlaneT(0, 0, 0), case.rq.get("divisor", 0))
    out = np.full(case.expected.size, 0x5A, dtype=np.int8)
    scratch = np.full(max(case.scratch, 1), 0xA5 - 256, dtype=np.int8)
    f = case.fields
    rq_p = ctypes.pointer(rq) if rq is not None else None
    if KIND[case.op] == "pool":
        args = PoolArgs(_ptr(arr("in", np.int8), c_int8), f["in_h"], f["in_w"], f["c"], _ptr(out, c_int8),
                        f["out_h"], f["out_w"], f["kh"], f["kw"], f["sh"], f["sw"], f["pad_t"], f["pad_l"],
                        f["pad_b"], f["pad_r"], f["input_offset"], rq_p)
    elif KIND[case.op] == "add":
        args = AddArgs(_ptr(arr("a", np.int8), c_int8), _ptr(arr("b", np.int8), c_int8),
                       out.ctypes.data, f["n"], (c_int32 * 2)(*f["in_mul"]), (c_int32 * 2)(*f["in_offset"]),
                       (c_int32 * 2)(*f.get("in_shift", [0, 0])), rq=rq_p)
    else:
        args = ConvArgs(_ptr(arr("in", np.int8), c_int8), f["in_h"], f["in_w"], f["in_c"],
                        _ptr(arr("weights", np.int8), c_int8), _ptr(arr("bias", np.int32), c_int32),
                        out.ctypes.data, f["out_h"], f["out_w"], f["out_c"], f["kh"], f["kw"], f["sh"], f["sw"],
                        f["pad_t"], f["pad_l"], f["pad_b"], f["pad_r"], f["input_offset"], rq_p,
                        _ptr(scratch, c_int8) if case.scratch else None, case.scratch)
        args.weight_offset = f.get("weight_offset", 0)
    getattr(lib, case.fn)(ctypes.byref(args), 0, 1)
    return out.reshape(case.expected.shape)


@pytest.mark.parametrize("op", OPS)
def test_kernel_matches_golden_on_host(host_lib, op):
    for i, case in enumerate(cases(op, 300, seed=1) + (probes(op, 100, seed=1) if op in PROBED else [])):
        got = run_host(host_lib, case)
        if not np.array_equal(got, case.expected):
            bad = np.argwhere(got != case.expected)[0]
            pytest.fail(f"{op} case {i} ({case.fields}): first difference at {bad.tolist()}: "
                        f"kernel {got[tuple(bad)]} vs golden {case.expected[tuple(bad)]}")


# ---- under QEMU --------------------------------------------------------------

def _c_array(name, a):
    from tessera.codegen.cfmt import byte_string, int_list

    if a.dtype == np.int8:
        return f"static const int8_t {name}[{max(a.size, 1)}] __attribute__((aligned(4))) =\n{byte_string(a)};"
    return f"static const int32_t {name}[{max(a.size, 1)}] = {{\n{int_list(a)}\n}};"


def harness_program(src, n_cases):
    """The harness's C text: src (declarations and case<i>() functions) and
    a main() running the n_cases cases, then `TSR done failures=<n>`."""
    calls = "\n".join(f"    case{i}();" for i in range(n_cases))
    return "\n".join(src + ["int main(void)\n{\n    hal_init();\n" + calls +
                             '\n    printf("TSR done failures=%d\\n", failures);\n    return failures != 0;\n}\n'])


def harness_source(case_list):
    """A firmware main() that runs every case, compares its output with the
    golden one and prints `TSR kcase <i> <op> ok|bad count=<n> macs=<m>`."""
    out_max = max(c.expected.size for c in case_list)
    scratch_max = max(max(c.scratch for c in case_list), 4)
    src = ['#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n',
           '#include "tessera/cmsis_nn.h"\n#include "tessera/hal.h"\n',
           f"static int8_t out_buf[{out_max}] __attribute__((aligned(8)));",
           f"static int8_t scratch[{scratch_max}] __attribute__((aligned(8)));",
           "static int failures;\n",
           """static void report(int i, const char *op, const int8_t *want, uint32_t n, uint32_t count, uint32_t macs)
{
    uint32_t k = 0;
    while (k < n && out_buf[k] == want[k])
        k++;
    if (k < n) {
        failures++;
        printf("TSR kcase %d %s bad at=%lu got=%d want=%d\\n", i, op, (unsigned long)k, out_buf[k], want[k]);
    } else {
        printf("TSR kcase %d %s ok count=%lu macs=%lu\\n", i, op, (unsigned long)count, (unsigned long)macs);
    }
}
"""]
    for i, c in enumerate(case_list):
        p = f"c{i}_"
        for name, a in c.arrays.items():
            src.append(_c_array(p + name, np.ascontiguousarray(a).reshape(-1)))
        src.append(_c_array(p + "want", c.expected.reshape(-1)))
        body = []
        if c.rq is not None:
            rq = c.rq
            src.append(_c_array(p + "mul", np.array(rq["mul"], np.int32)))
            src.append(f"static const int8_t {p}shift[] = {{{', '.join(map(str, rq['shift']))}}};")
            if any(rq["add"]):
                src.append(_c_array(p + "add", np.array(rq["add"], np.int32)))
            body.append(f"    static const tsr_requant_t rq = {{{p}mul, {p + 'add' if any(rq['add']) else 'NULL'}, "
                        f"{p}shift, {rq['per_channel']}, {rq['zero_point']}, {rq['lo']}, {rq['hi']}, "
                        f"{ROUNDING_C[rq['rounding']]}, {{0, 0, 0}}, {rq.get('divisor', 0)}, NULL, NULL, 0, 0}};")
        kind = KIND[c.op]
        body.append(f"    tsr_{kind}_args_t a;\n    memset(&a, 0, sizeof a);")
        for name in c.arrays:
            body.append(f"    a.{name} = {p}{name};")
        for name, v in c.fields.items():
            if isinstance(v, list):
                body += [f"    a.{name}[{j}] = {x};" for j, x in enumerate(v)]
            else:
                body.append(f"    a.{name} = {v};")
        body.append("    a.out = out_buf;")
        if c.rq is not None:
            body.append("    a.rq = &rq;")
        if kind == "conv":
            body.append(f"    a.scratch = {'scratch' if c.scratch else 'NULL'};\n    a.scratch_bytes = {c.scratch};")
        body.append(f"    memset(out_buf, 0x5a, {c.expected.size});\n    memset(scratch, 0xa5, sizeof scratch);")
        body.append(f"    uint64_t t = hal_counter();\n    {c.fn}(&a, 0, 1);\n    t = hal_counter() - t;")
        body.append(f'    report({i}, "{c.op}", {p}want, {c.expected.size}, (uint32_t)t, {c.macs});')
        src.append(f"static void case{i}(void)\n{{\n" + "\n".join(body) + "\n}\n")
    return harness_program(src, len(case_list))


def harness_target(target_name):
    """A target with the board's whole 4 MB + 4 MB for the harness (its
    cases are constants), the core and runner of target_name."""
    from tessera.config import load_target, parse_target

    t = load_target(os.path.join(ROOT, "targets", target_name + ".yaml"), target_name)
    data = {
        "description": f"kernel test harness on {target_name}'s core", "platform": "cortexm", "cores": 1,
        "memory": {"rom": {"size": 4 << 20, "kind": "flash", "address": 0, "writable": False,
                           "reserved": {"code": (4 << 20) - 4}},
                   "ram": {"size": 4 << 20, "kind": "sram", "address": 0x20000000,
                           "reserved": {"data": 2 << 20, "stack": 64 << 10}}},
        "place": {"tiles": "ram", "activations": "ram", "weights": "rom"},
        "toolchain": dict(t["toolchain"]), "kernels": "cmsis_nn", "runner": dict(t["runner"]),
    }
    return parse_target(data, "harness", "harness"), t


def build_harness(case_list, target_name, tmp, checkout=None, source=None):
    """Compile and link the harness firmware (on ARM's CMSIS-NN from
    `checkout` when given; `source`: another harness's main, e.g.
    tests/test_cmsis_fused.py's); returns (elf path, runner)."""
    from tessera.codegen import linker

    target, real = harness_target(target_name)
    tc = target["toolchain"]
    if shutil.which(tc["cc"]) is None or shutil.which(target["runner"]["program"]) is None:
        pytest.skip(f"needs {tc['cc']} and {target['runner']['program']}")
    (tmp / "harness.c").write_text(source if source is not None else harness_source(case_list))
    (tmp / "link.ld").write_text(linker.script(linker.view(target, linker.CORTEX_M)))
    elf = tmp / "harness.elf"
    files, includes = kernel_sources(checkout)
    # ARM's code is not held to tessera's warning flags
    warnings = ["-w"] if checkout else ["-Wall", "-Wextra", "-Werror"]
    from cmsis_cases import LIBRARY

    cmd = [tc["cc"], *tc["cflags"], *LIBRARY["build"].get("cflags", []), "--specs=picolibc.specs",
           "--oslib=semihost", "--crt0=semihost", "-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections",
           *warnings, "-DTSR_CMSIS_STRICT",
           "-DCMSIS_NN_USE_SINGLE_ROUNDING", *[f"-I{d}" for d in includes], "-T", str(tmp / "link.ld"),
           str(tmp / "harness.c"), os.path.join(KERNELS, "hal", "cortexm", "hal.c"), *files, "-o", str(elf)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    return str(elf), real["runner"]


def run_harness(case_list, target_name, tmp, checkout=None, source=None):
    """{case index: (op, ok, count, macs, line)} from one QEMU run."""
    from tessera import runners
    from tessera.errors import RunError

    elf, runner = build_harness(case_list, target_name, tmp, checkout, source)
    try:
        text = runners.run(runner, elf)
    except RunError as err:   # the harness exits 1 when a case failed; its lines say which
        text = getattr(err, "output", "") or str(err)
    results = {}
    for line in text.splitlines():
        parts = line.split()
        if parts[:2] == ["TSR", "kcase"]:
            fields = dict(p.split("=", 1) for p in parts[5:] if "=" in p)
            results[int(parts[2])] = (parts[3], parts[4] == "ok", int(fields.get("count", -1)),
                                      int(fields.get("macs", 0)), line)
    assert "TSR done" in text, text[-2000:]
    return results


@pytest.mark.qemu
@pytest.mark.parametrize("target_name", ["stm32h7", "stm32f4"])
def test_kernels_match_golden_under_qemu(target_name, tmp_path):
    case_list = [c for op in OPS for c in cases(op, 25, seed=2) + (probes(op, 10, seed=2) if op in PROBED else [])]
    results = run_harness(case_list, target_name, tmp_path)
    assert len(results) == len(case_list)
    bad = [line for _, ok, _, _, line in results.values() if not ok]
    assert not bad, "\n".join(bad[:10])
    # instructions per MAC, for the record (the benchmark measures whole networks)
    for op in OPS:
        rows = [(n, m) for o, _, n, m, _ in results.values() if o == op]
        print(f"{target_name} {op}: {sum(n for n, _ in rows) / max(1, sum(m for _, m in rows)):.2f} "
              "instructions/MAC on small random tiles")


@pytest.mark.qemu
def test_arm_cmsis_nn_checkout_is_exact_too(tmp_path):
    """The same cases on ARM's CMSIS-NN (TESSERA_CMSIS_NN=<checkout>, as
    `cmsis_nn=<checkout>` builds it): every call accepted, every output
    bit-exact with the golden model (tessera's half-up requantization is
    CMSIS-NN's single rounding)."""
    checkout = os.environ.get("TESSERA_CMSIS_NN")
    if not checkout:
        pytest.skip("set TESSERA_CMSIS_NN to an ARM CMSIS-NN checkout to run this")
    case_list = [c for op in OPS for c in cases(op, 25, seed=3)]
    results = run_harness(case_list, "stm32h7", tmp_path, checkout)
    assert len(results) == len(case_list)
    bad = [line for _, ok, _, _, line in results.values() if not ok]
    assert not bad, "\n".join(bad[:10])


@pytest.mark.qemu
def test_counter_ticks_every_40_instructions(tmp_path):
    """The HAL's counter under -icount shift=0: a loop of a known number of
    instructions reads as that many, to within the 40-instruction tick."""
    from tessera import runners
    from tessera.codegen import linker

    target, real = harness_target("stm32h7")
    tc = target["toolchain"]
    if shutil.which(tc["cc"]) is None or shutil.which(real["runner"]["program"]) is None:
        pytest.skip(f"needs {tc['cc']} and {real['runner']['program']}")
    (tmp_path / "t.c").write_text("""#include <stdint.h>
#include <stdio.h>
#include "tessera/hal.h"
int main(void)
{
    hal_init();
    for (uint32_t n = 1000; n <= 1000000; n *= 10) {
        uint32_t k = n;
        uint64_t t = hal_counter();
        __asm__ volatile("1: subs %0, %0, #1\\n\\tbne 1b" : "+r"(k));   /* 2 instructions per turn */
        t = hal_counter() - t;
        printf("TSR loop %lu %lu\\n", (unsigned long)(2 * n), (unsigned long)t);
    }
    return 0;
}
""")
    (tmp_path / "link.ld").write_text(linker.script(linker.view(target, linker.CORTEX_M)))
    elf = tmp_path / "t.elf"
    cmd = [tc["cc"], *tc["cflags"], "--specs=picolibc.specs", "--oslib=semihost", "--crt0=semihost",
           f"-I{INCLUDES[0]}", "-T", str(tmp_path / "link.ld"), str(tmp_path / "t.c"),
           os.path.join(KERNELS, "hal", "cortexm", "hal.c"), "-o", str(elf)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    text = runners.run(real["runner"], str(elf))
    loops = [(int(p[2]), int(p[3])) for p in (line.split() for line in text.splitlines()) if p[:2] == ["TSR", "loop"]]
    assert len(loops) == 4
    for instructions, counted in loops:
        assert counted % 40 == 0
        # the loop plus the counter reads around it: a few ticks at most
        assert 0 <= counted - instructions <= 2 * 40, (instructions, counted)


def _shaped(op, count, seed, keep):
    """count random cases of op for which keep(case) holds (drawn in turn
    from one seeded stream)."""
    rng = np.random.default_rng([seed, OPS.index(op), 7])
    out = []
    while len(out) < count:
        c = make_case(op, rng)
        if keep(c):
            out.append(c)
    return out


@pytest.mark.qemu
def test_eight_channel_pointwise_rows_under_qemu(tmp_path):
    """Pointwise tiles of 8 input channels with a bias and int8's own range
    take mm.c's tsr_mm4_k8_*_asm (CMSIS-NN's half up and TFLite's rounding),
    four pixels at a time, the rest through the C path: bit-exact."""
    def keep(c):
        return (c.fields["in_c"] == 8 and "bias" in c.arrays and c.rq["lo"] == -128 and c.rq["hi"] == 127
                and c.fields["in_h"] * c.fields["in_w"] >= 4 and c.scratch >= 8 * c.fields["out_c"] + 64)
    case_list = _shaped("pointwise", 6, 5, keep) + _shaped("pointwise_tfl", 6, 5, keep)
    results = run_harness(case_list, "stm32h7", tmp_path)
    assert len(results) == len(case_list)
    bad = [line for _, ok, _, _, line in results.values() if not ok]
    assert not bad, "\n".join(bad[:10])


@pytest.mark.qemu
@pytest.mark.parametrize("target_name", ["stm32h7", "stm32f4"])
def test_one_pixel_left_pointwise_under_qemu(target_name, tmp_path):
    """Pointwise tiles of 4n + 1 pixels (one a tile among them) on the
    assembly's path: the last pixel runs the four-pixel assembly with its
    column in the last slot and the outputs' stride 0 (mm.c's
    tsr_mm_pointwise), the eight-value rows' assembly too; bit-exact."""
    def keep(c):
        f = c.fields
        return ((f["in_h"] * f["in_w"]) % 4 == 1 and "bias" in c.arrays and c.rq["lo"] == -128
                and c.rq["hi"] == 127 and c.rq["per_channel"] and f["in_c"] % 4 == 0
                and c.scratch >= 8 * f["out_c"] + 8 * f["in_c"])
    case_list = _shaped("pointwise", 10, 11, keep) + _shaped("pointwise_tfl", 10, 11, keep)
    assert any(c.fields["in_c"] == 8 for c in case_list) and any(c.fields["in_h"] * c.fields["in_w"] == 1
                                                                 for c in case_list)
    results = run_harness(case_list, target_name, tmp_path)
    assert len(results) == len(case_list)
    bad = [line for _, ok, _, _, line in results.values() if not ok]
    assert not bad, "\n".join(bad[:10])


def faster_than_reference(case_list, results, measured, tmp_path, fast, slow):
    """The cases at `measured` once more in the same test, with the
    reference kernel `slow` called where the harness calls `fast`: each is
    right there too and takes more instructions than `fast` took in
    `results`. Returns the reference's counts, in `measured`'s order."""
    refs = [case_list[i] for i in measured]
    (tmp_path / "ref").mkdir()
    ref = run_harness(refs, "stm32h7", tmp_path / "ref",
                      source=harness_source(refs).replace(f"{fast}(&a", f"{slow}(&a"))
    for k, i in enumerate(measured):
        assert ref[k][1] and results[i][2] < ref[k][2], (results[i], ref[k])
    return [ref[k][2] for k in range(len(measured))]


@pytest.mark.qemu
def test_table_lookup_under_qemu(tmp_path):
    """tsr_cmsis_lut (rowwise.c, four bytes a word) against the golden model's
    lut on tiles of every length mod 8, one table or one per channel (PReLU
    slopes); and fewer instructions than tsr_lut's for both."""
    from cmsis_cases import Case
    from tessera.golden import ops

    rng = np.random.default_rng(33)
    case_list = []
    for i, (pixels, c, per_channel) in enumerate([(9, 16, 0), (5, 3, 0), (1, 1, 0), (7, 13, 0), (64, 32, 0),
                                                  (3, 5, 1), (7, 13, 1), (2, 6, 1), (36, 64, 1),
                                                  (16, 24, 1), (4, 7, 1)]):
        x = rng.integers(-128, 128, (pixels, 1, c)).astype(np.int8)
        table = rng.integers(-128, 128, (c if per_channel else 1, 256)).astype(np.int8)
        case_list.append(Case("lut", {"pixels": pixels, "c": c, "per_channel": per_channel},
                              {"in": x, "table": table}, ops.lut(x, table).astype(np.int8), macs=x.size))
    results = run_harness(case_list, "stm32h7", tmp_path)
    assert len(results) == len(case_list)
    bad = [line for _, ok, _, _, line in results.values() if not ok]
    assert not bad, "\n".join(bad[:10])
    # the word paths against the reference kernel on the same bytes, in one run
    ref = faster_than_reference(case_list, results, [4, 8], tmp_path, "tsr_cmsis_lut", "tsr_lut")
    print(f"lut on 2048 bytes: {results[4][2]} instructions, tsr_lut {ref[0]}; "
          f"a table per channel on 2304 bytes (36 x 64): {results[8][2]}, tsr_lut {ref[1]}")


def _concat_source(case_list, fn):
    """A harness main() running tsr_cmsis_concat (or `fn`) on each case
    (inputs, axis, in_mul, in_offset, rq dict, expected), in run_harness's
    line format."""
    from tessera.codegen.cfmt import int_list

    out_max = max(c["want"].size for c in case_list)
    src = ['#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n',
           '#include "tessera/cmsis_nn.h"\n#include "tessera/hal.h"\n',
           f"static int8_t out_buf[{out_max}] __attribute__((aligned(8)));", "static int failures;\n"]
    for i, c in enumerate(case_list):
        p = f"c{i}_"
        for j, x in enumerate(c["xs"]):
            src.append(_c_array(f"{p}x{j}", x.reshape(-1)))
        src.append(_c_array(p + "want", c["want"].reshape(-1)))
        rq = c["rq"]
        src.append(_c_array(p + "mul", np.array(rq["mul"], np.int32)))
        src.append(f"static const int8_t {p}shift[] = {{{', '.join(map(str, rq['shift']))}}};")
        shape = c["xs"][0].shape
        outer = int(np.prod(shape[:c["axis"]], dtype=np.int64))
        body = [f"    static const tsr_requant_t rq = {{{p}mul, NULL, {p}shift, 0, {rq['zero_point']}, {rq['lo']}, "
                f"{rq['hi']}, {ROUNDING_C[rq['rounding']]}, {{0, 0, 0}}, 0, NULL, NULL, 0, 0}};",
                "    tsr_concat_args_t a;\n    memset(&a, 0, sizeof a);",
                f"    a.n_in = {len(c['xs'])};\n    a.outer = {outer};\n    a.out = out_buf;\n    a.rq = &rq;"]
        for j, x in enumerate(c["xs"]):
            body.append(f"    a.in[{j}] = {p}x{j};\n    a.inner[{j}] = {x.size // outer};\n"
                        f"    a.in_mul[{j}] = {c['in_mul'][j]};\n    a.in_offset[{j}] = {c['in_offset'][j]};")
        n = c["want"].size
        body += [f"    memset(out_buf, 0x5a, {n});", f"    uint64_t t = hal_counter();\n    {fn}(&a, 0, 1);",
                 "    t = hal_counter() - t;", "    uint32_t k = 0;",
                 f"    while (k < {n} && out_buf[k] == {p}want[k])\n        k++;",
                 f'    if (k < {n}) {{\n        failures++;\n        printf("TSR kcase {i} concat bad at=%lu\\n", '
                 '(unsigned long)k);\n    } else {\n'
                 f'        printf("TSR kcase {i} concat ok count=%lu macs={n}\\n", (unsigned long)t);\n    }}']
        src.append(f"static void case{i}(void)\n{{\n" + "\n".join(body) + "\n}\n")
    return harness_program(src, len(case_list))


@pytest.mark.qemu
def test_concatenation_under_qemu(tmp_path):
    """tsr_cmsis_concat (concat.c) against the golden model: copies along
    each HWC axis (runs of every length mod 8), small rescaled inputs (the
    reference's per-value path), rescaled inputs through their tables, one
    of them an identity (copies); the copies and the tables take fewer
    instructions than tsr_concat."""
    from cmsis_cases import golden_requant
    from tessera.golden import ops

    rng = np.random.default_rng(34)
    same = {"mul": [1], "shift": [0], "add": [0], "zero_point": 0, "lo": -128, "hi": 127, "rounding": "half_up"}
    scaled = {"mul": [1 << 20], "shift": [22], "add": [0], "zero_point": 3, "lo": -128, "hi": 127,
              "rounding": "half_up"}
    case_list = []
    for shapes, axis, mul, off, rq in [
            ([(4, 5, 3), (4, 5, 8), (4, 5, 1)], 2, [1, 1, 1], [0, 0, 0], same),
            ([(2, 6, 16), (3, 6, 16)], 0, [1, 1], [0, 0], same),
            ([(4, 3, 5), (4, 7, 5)], 1, [1, 1], [0, 0], same),
            ([(16, 16, 32), (16, 16, 32)], 2, [1, 1], [0, 0], same),
            ([(3, 4, 6), (3, 4, 2)], 2, [3, 1], [1, -2], scaled),
            ([(16, 16, 16), (16, 16, 8)], 2, [3, 5], [7, -4], scaled),
            ([(8, 8, 16), (9, 8, 16), (2, 8, 16)], 0, [4, 3, 2], [0, 1, -3], dict(scaled, zero_point=0)),
            ([(8, 8, 24), (8, 8, 3), (8, 8, 13)], 2, [3, 1, 2], [1, -2, 5], scaled)]:
        xs = [rng.integers(-128, 128, s).astype(np.int8) for s in shapes]
        want = golden_requant(ops.concat(xs, mul, off, axis), dict(rq, per_channel=0, divisor=0))
        case_list.append({"xs": xs, "axis": axis, "in_mul": mul, "in_offset": off, "rq": rq, "want": want})
    results = run_harness(None, "stm32h7", tmp_path, source=_concat_source(case_list, "tsr_cmsis_concat"))
    assert len(results) == len(case_list)
    bad = [line for _, ok, _, _, line in results.values() if not ok]
    assert not bad, "\n".join(bad)
    (tmp_path / "ref").mkdir()
    ref = run_harness(None, "stm32h7", tmp_path / "ref", source=_concat_source(case_list[3:], "tsr_concat"))
    for k, i in enumerate(range(3, len(case_list))):
        assert ref[k][1] and results[i][2] <= ref[k][2], (results[i], ref[k])
    assert results[5][2] < ref[2][2] and results[6][2] < ref[3][2]
    print(f"concat of 16 kB: {results[3][2]} instructions, tsr_concat {ref[0][2]}; rescaled 16x16x(16+8): "
          f"{results[5][2]}, tsr_concat {ref[2][2]}; three rescaled along H, one an identity: {results[6][2]}, "
          f"tsr_concat {ref[3][2]}")


@pytest.mark.qemu
def test_products_under_qemu(tmp_path):
    """tsr_cmsis_mul (mul.c) against the golden model: same shapes and a
    [1, 1, C] vector in either operand order, half up, floor (with an
    additive term) and TFLite's rounding; a broadcast it does not take (a
    [H, 1, C] operand) on tsr_mul's path; and fewer instructions than
    tsr_mul's on a squeeze-and-excitation scale."""
    from cmsis_cases import Case, golden_requant
    from tessera.golden import ops

    rng = np.random.default_rng(35)
    case_list = []
    for ashape, bshape, rounding in [((4, 4, 16), (1, 1, 16), "half_up"), ((1, 1, 7), (3, 5, 7), "floor"),
                                     ((3, 3, 5), (3, 3, 5), "tflite"), ((6, 6, 32), (1, 1, 32), "tflite"),
                                     ((4, 4, 8), (4, 1, 8), "half_up")]:
        a = rng.integers(-128, 128, ashape).astype(np.int8)
        b = rng.integers(-128, 128, bshape).astype(np.int8)
        off = [int(rng.integers(-128, 129)), int(rng.integers(-128, 129))]
        acc = ops.mul(a, b, off)
        top = int(np.abs(acc).max())
        s = 40 if rounding == "tflite" else 20
        rq = {"mul": [int(rng.integers(1, 2**30)) >> (0 if rounding == "tflite" else 14)], "shift": [s],
              "add": [int(rng.integers(-2**10, 2**10))] if rounding == "floor" else [0], "per_channel": 0,
              "zero_point": int(rng.integers(-20, 20)), "lo": -128, "hi": 127, "rounding": rounding, "divisor": 0}
        assert top < 2**18
        shape = np.broadcast_shapes(ashape, bshape)
        f = {"out_h": shape[0], "out_w": shape[1], "out_c": shape[2], "a_h": ashape[0], "a_w": ashape[1],
             "a_c": ashape[2], "b_h": bshape[0], "b_w": bshape[1], "b_c": bshape[2], "in_offset": off}
        case_list.append(Case("mul", f, {"a": a, "b": b}, golden_requant(acc, rq), rq, macs=acc.size))
    results = run_harness(case_list, "stm32h7", tmp_path)
    assert len(results) == len(case_list)
    bad = [line for _, ok, _, _, line in results.values() if not ok]
    assert not bad, "\n".join(bad)
    (tmp_path / "ref").mkdir()
    ref_src = harness_source(case_list[3:4]).replace("tsr_cmsis_mul(&a", "tsr_mul(&a")
    ref = run_harness(case_list[3:4], "stm32h7", tmp_path / "ref", source=ref_src)
    assert ref[0][1] and results[3][2] < ref[0][2]
    print(f"mul of 1152 values by a vector: {results[3][2]} instructions, tsr_mul {ref[0][2]}")


def _tflite_bilinear_axis(n_in, n_out):
    """TFLite's ResizeBilinearInteger coordinates with half-pixel centres as
    its importer writes them (frontend/tflite.py: fractions doubled to 11
    bits, negative at the first outputs)."""
    scale = ((1 << 10) * n_in + n_out // 2) // n_out
    out = []
    for v in range(n_out):
        s = v * scale + scale // 2 - (1 << 9)
        lo = max(int(s / (1 << 10)), 0)
        hi = min(int((s + (1 << 10) - 1) / (1 << 10)), n_in - 1)
        out += [lo, hi, 2 * (s - (1 << 10) * lo)]
    return out


@pytest.mark.qemu
def test_resize_under_qemu(tmp_path):
    """tsr_cmsis_resize (resize.c) against the golden model: nearest resizes
    keeping the input's quantization (copies) and changing it (a table),
    ONNX bilinear (half up, floor), TFLite's bilinear (negative fractions,
    the rounded division by 2^22), channel counts of every length mod 4, an
    offset too large for int32 sums (tsr_resize's path); and fewer
    instructions than tsr_resize on a nearest 10x10x64 -> 20x20x64
    (RetinaFace's), an ONNX bilinear and a TFLite bilinear (MoveNet's)."""
    from cmsis_cases import Case, golden_requant
    from tessera.frontend.tables import resize_table
    from tessera.golden import ops
    from tessera.ir import RESIZE_FRAC

    rng = np.random.default_rng(36)
    same = {"mul": [1 << 30], "shift": [52], "add": [0], "per_channel": 0, "zero_point": -128, "lo": -128,
            "hi": 127, "rounding": "half_up", "divisor": 0}
    tfl = {"mul": [1 << 22], "shift": [0], "add": [0], "per_channel": 0, "zero_point": 0, "lo": -128,
           "hi": 127, "rounding": "tflite_div", "divisor": 0}

    def scaled(shift, rounding, zp, lo=-128, hi=127):
        return {"mul": [int(rng.integers(1 << 29, 1 << 31))], "shift": [shift], "add": [0], "per_channel": 0,
                "zero_point": zp, "lo": lo, "hi": hi, "rounding": rounding, "divisor": 0}

    specs = [  # (in HWC, out HW, table maker, input offset, rq)
        ((10, 10, 64), (20, 20), ("nearest", "half_pixel"), 128, same),
        ((5, 7, 5), (9, 11), ("nearest", "half_pixel"), 3, scaled(53, "half_up", -7)),
        ((7, 9, 3), (4, 13), ("nearest", "asymmetric"), -20, scaled(52, "floor", 5, -100, 90)),
        ((8, 8, 16), (16, 16), ("linear", "half_pixel"), 128, same),
        ((6, 6, 64), (12, 12), "tflite", 0, tfl),
        ((5, 4, 7), (9, 7), ("linear", "align_corners"), -13, scaled(55, "half_up", 9)),
        ((3, 6, 6), (7, 5), ("linear", "asymmetric"), 40, scaled(54, "floor", -3)),
        ((4, 4, 9), (8, 8), ("linear", "half_pixel"), 600, scaled(57, "half_up", 0)),
        ((4, 5, 10), (8, 9), "tflite", 0, tfl),
    ]
    case_list = []
    for (h, w, c), (ho, wo), how, off, rq in specs:
        x = rng.integers(-128, 128, (h, w, c)).astype(np.int8)
        if how == "tflite":
            table = _tflite_bilinear_axis(h, ho) + _tflite_bilinear_axis(w, wo)
        else:
            table = resize_table((h, w), (ho, wo), (ho / h, wo / w), how[0], how[1], "round_prefer_floor")
        want = golden_requant(ops.resize(x, off, table, ho, wo, RESIZE_FRAC), rq)
        t = np.asarray(table, np.int32)
        f = {"in_h": h, "in_w": w, "c": c, "out_h": ho, "out_w": wo, "input_offset": off, "frac": RESIZE_FRAC}
        case_list.append(Case("resize", f, {"in": x, "rows": t[:3 * ho], "cols": t[3 * ho:]}, want, rq,
                              macs=want.size))
    results = run_harness(case_list, "stm32h7", tmp_path)
    assert len(results) == len(case_list)
    bad = [line for _, ok, _, _, line in results.values() if not ok]
    assert not bad, "\n".join(bad)
    # the reference kernel on the same tiles, in the same run of the test
    measured = [0, 3, 4]
    ref = faster_than_reference(case_list, results, measured, tmp_path, "tsr_cmsis_resize", "tsr_resize")
    print("resize: " + "; ".join(f"{n} {results[i][2]} instructions, tsr_resize {ref[k]} "
                                 f"({results[i][2] / ref[k]:.3f}x)"
                                 for k, (i, n) in enumerate(zip(measured, ("nearest 10x10x64 -> 20x20x64",
                                                                          "ONNX bilinear 8x8x16 -> 16x16x16",
                                                                          "TFLite bilinear 6x6x64 -> 12x12x64")))))


@pytest.mark.qemu
def test_dilated_convolution_under_qemu(tmp_path):
    """tsr_cmsis_conv2d_dilated (dilated.c) against the golden model: 1D
    (a TCN's [1, k] kernels dilated 2 and 4, causal padding) and 2D
    dilations, strides, odd channel counts (a scalar tail of the window),
    half-up, floor with an additive term and TFLite's rounding, per channel
    or per tensor; and fewer instructions than tsr_conv2d's dilated loop."""
    from cmsis_cases import Case, _requant, _tflite_requant, golden_requant
    from tessera.golden import ops

    rng = np.random.default_rng(37)
    specs = [  # (in HWC, kernel, stride, dilation, pad t l b r, out_c, form)
        ((1, 64, 16), (1, 3), (1, 1), (1, 2), (0, 4, 0, 0), 16, "half_up"),
        ((1, 40, 16), (1, 3), (1, 1), (1, 4), (0, 8, 0, 0), 16, "tflite"),
        ((9, 9, 5), (3, 3), (1, 1), (2, 2), (2, 2, 2, 2), 7, "half_up"),
        ((10, 8, 3), (3, 2), (2, 1), (3, 2), (1, 0, 2, 1), 5, "floor"),
        ((8, 8, 16), (3, 3), (1, 1), (2, 2), (2, 2, 2, 2), 16, "tflite"),
    ]
    case_list = []
    for (h, w, ci), (kh, kw), (sh, sw), (dh, dw), pad, co, form in specs:
        x = rng.integers(-128, 128, (h, w, ci)).astype(np.int8)
        wt = rng.integers(-128, 128, (co, kh, kw, ci)).astype(np.int8)
        bias = rng.integers(-2**14, 2**14, co).astype(np.int32)
        off = int(rng.integers(-127, 129))
        acc = ops.conv2d(x, wt, bias, off, (kh, kw), (sh, sw), pad, (dh, dw))
        top = int(np.abs(acc).max())
        rq = _tflite_requant(rng, co, top) if form == "tflite" else _requant(rng, co, top, cmsis=form == "half_up")
        want = golden_requant(acc, rq)
        ho, wo = acc.shape[:2]
        patch = kh * kw * ci
        f = {"in_h": h, "in_w": w, "in_c": ci, "out_h": ho, "out_w": wo, "out_c": co, "kh": kh, "kw": kw,
             "sh": sh, "sw": sw, "pad_t": pad[0], "pad_l": pad[1], "pad_b": pad[2], "pad_r": pad[3],
             "input_offset": off, "dh": dh, "dw": dw}
        case_list.append(Case("conv2d_dilated", f, {"in": x, "weights": wt, "bias": bias}, want, rq,
                              scratch=4 * patch + 12, macs=want.size * patch))
    results = run_harness(case_list, "stm32h7", tmp_path)
    assert len(results) == len(case_list)
    bad = [line for _, ok, _, _, line in results.values() if not ok]
    assert not bad, "\n".join(bad)
    measured = [0, 4]
    ref = faster_than_reference(case_list, results, measured, tmp_path, "tsr_cmsis_conv2d_dilated", "tsr_conv2d")
    print("dilated conv2d: " + "; ".join(
        f"{n} {results[i][2]} instructions, tsr_conv2d {ref[k]} ({results[i][2] / ref[k]:.3f}x)"
        for k, (i, n) in enumerate(zip(measured, ("1D 64x16 -> 64x16, k 3, d 2", "8x8x16 -> 8x8x16, 3x3, d 2")))))
