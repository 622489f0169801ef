"""Attention's products of two activations on GVSoC's pulp-open cluster:
pnn_matmul2's Xpulpv2 path (kernels/pulp_nn/attention.c, built with
TSR_ISA_XPULPV2 as targets/pulp_open.yaml asks) against the golden model
bit for bit, on the shapes of the corpus transformers' attention (Q.K^T and
P.V of the keyword transformer: 4 heads of 49 tokens by 16; the ViT's 3
heads of 64 by 16; Deeploy's EEGFormer's 8 heads of 66 by 2) and odd ones
(K not a multiple of 4, one head, offsets of every kind, per-batch
requantization, int32 outputs). One firmware runs every call on 8 cores
(or 1), prints each output and, per call, its cycles; the same calls on the
reference kernel (tsr_matmul) in the same firmware give the baseline
(`attention_matmul_cycles` below, used by benchmarks/attention.py).

Needs GVSoC and riscv64-unknown-elf-gcc with picolibc; skips otherwise.
"""

import os
import re

import numpy as np
import pytest

from helpers import PNN_FALLBACK, ROOT
from tessera.golden import ops
from test_gvsoc import GVSOC_MARKS, _target, build_firmware
from test_pulp_nn_gvsoc import MAIN_HEAD
from test_ref_kernels import ROUNDING_C, Rq, int8s

pytestmark = GVSOC_MARKS

PNN = os.path.join(ROOT, "kernels", "pulp_nn")
REF = os.path.join(ROOT, "kernels", "reference")


def case(seed, bt, m, k, n, offs, rq_kind, ncores=8, trans_b=False, shared=False, name=""):
    rng = np.random.default_rng(seed)
    a = int8s(rng, (bt, m, k))
    b = int8s(rng, (1 if shared else bt, n, k) if trans_b else (1 if shared else bt, k, n))
    acc = ops.matmul(a, b, offs, trans_b)
    rq = None
    if rq_kind is not None:
        top = int(np.abs(acc).max()) or 1
        if rq_kind == "batch":
            # one multiplier and shift per batch (Deeploy's RequantShift per head): C planes
            # of bt values each ([c][y], views.param_arrays), per_channel
            mul = rng.integers(2**29, 2**31 - 1, size=bt)
            shift = [max(1, min(62, (top * int(v)).bit_length() - 7)) for v in mul]
            zp = int(rng.integers(-20, 20))
            rq = Rq(np.tile(mul, n).tolist(), None, shift * n, 1, zp, -128, 127, "half_up")
            rq.golden.mul, rq.golden.shift = mul.tolist(), shift
            rq.plane = (bt, 1, 1)
        else:
            mul = rng.integers(2**30, 2**31 - 1, size=n if rq_kind == "channel" else 1)
            shift = [max(1, min(62, (top * int(v)).bit_length() - 7)) for v in mul]
            rq = Rq(mul.tolist(), None, shift, int(rq_kind == "channel"), int(rng.integers(-20, 20)), -128, 127,
                    "half_up")
    if rq is None:
        expected = acc.astype(np.int32)
    elif getattr(rq, "plane", None):
        g = rq.golden
        g.shape = list(rq.plane)
        expected = ops.requantize(acc, g).astype(np.int8)
    else:
        expected = ops.requantize(acc, rq.golden).astype(np.int8)
    kp = (k + 3) // 4 * 4
    return dict(a=a, b=b, offs=offs, rq=rq, expected=expected, trans_b=trans_b, shared=shared, ncores=ncores,
                scratch=4 * kp + 16 + 4 * m, macs=int(acc.size) * k, name=name)


CASES = [
    # the corpus keyword transformer's attention (4 heads, 49 tokens, 16 per head)
    case(1, 4, 49, 16, 49, [-5, -3], "tensor", name="kws Q.K^T"),
    case(2, 4, 49, 49, 16, [128, 2], "tensor", name="kws P.V"),
    # the tiny ViT's (3 heads, 64 tokens, 16 per head)
    case(3, 3, 64, 16, 64, [1, 4], "tensor", name="vit Q.K^T"),
    case(4, 3, 64, 64, 16, [128, -1], "tensor", name="vit P.V"),
    # Deeploy's EEGFormer (8 heads of 66 tokens, 2 per head) and CCT (one head, 192)
    case(5, 8, 66, 2, 66, [0, 0], "batch", name="EEGFormer Q.K^T"),
    case(6, 8, 66, 66, 2, [128, 0], "batch", name="EEGFormer P.V"),
    case(7, 1, 64, 192, 64, [0, 0], "tensor", name="CCT Q.K^T"),
    case(8, 1, 64, 64, 192, [128, 0], "tensor", name="CCT P.V"),
    # the rest: K transposed (trans_b), one matrix for every batch, odd sizes,
    # per-channel requantization, int32 outputs, one core
    case(9, 2, 7, 13, 9, [3, -7], "channel", trans_b=True),
    case(10, 3, 5, 5, 6, [0, 9], None, shared=True),
    case(11, 2, 9, 21, 11, [-128, 127], "channel", ncores=1),
    case(12, 5, 3, 8, 3, [0, 0], "tensor", ncores=3),
]


def c_array(name, ctype, values):
    vals = ", ".join(str(int(v)) for v in np.asarray(values).ravel()) or "0"
    return f"static const {ctype} {name}[] __attribute__((aligned(4))) = {{{vals}}};\n"


def firmware_source(cases):
    out = ['#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n',
           '#include "tessera/hal.h"\n#include "tessera/pulp_nn.h"\n\n']
    table = []
    for i, c in enumerate(cases):
        out.append(c_array(f"a{i}", "int8_t", c["a"]))
        out.append(c_array(f"b{i}", "int8_t", c["b"]))
        rq = "0"
        if c["rq"] is not None:
            r = c["rq"]
            out.append(c_array(f"m{i}", "int32_t", r.mul))
            out.append(c_array(f"s{i}", "int8_t", r.shift))
            plane = "{0, 0, 0}"
            if getattr(r, "plane", None):
                plane = f"{{{len(r.mul) // c['expected'].shape[2]}, 1, 0}}"   # [Bt, 1, 1] planes: step_h 1
            out.append(f"static const tsr_requant_t rq{i} = {{.mul = m{i}, .shift = s{i}, "
                       f".per_channel = {r.per_channel}, .zero_point = {r.zero_point}, .lo = {r.lo}, .hi = {r.hi}, "
                       f".rounding = {ROUNDING_C[r.rounding]}, .elem = {plane}}};\n")
            rq = f"&rq{i}"
        bt, m, k = c["a"].shape
        n = c["expected"].shape[2]
        table.append(f"    {{a{i}, sizeof a{i}, b{i}, sizeof b{i}, {rq}, {bt}, {m}, {n}, {k}, "
                     f"{0 if c['shared'] else k * n}, {c['offs'][0]}, {c['offs'][1]}, {int(c['trans_b'])}, "
                     f"{c['scratch']}, {c['expected'].nbytes}, {c['ncores']}}},\n")
    out.append('''
typedef struct {
    const int8_t *a;
    uint32_t a_bytes;
    const int8_t *b;
    uint32_t b_bytes;
    const tsr_requant_t *rq;
    int32_t bt, m, n, k, b_batch, oa, ob, trans_b, scratch, out_bytes, ncores;
} mcase_t;

static const mcase_t cases[] = {
''' + "".join(table) + '''};

static int8_t arena[60000] __attribute__((section(".bss.tsr.L1"), aligned(8)));
static tsr_matmul_args_t args __attribute__((section(".bss.tsr.L1")));
static tsr_requant_t rq_l1 __attribute__((section(".bss.tsr.L1")));
static const mcase_t *cur;
static int use_ref;

static void body(void *unused)
{
    int k = hal_core_id();
    (void)unused;
    if (k < cur->ncores) {
        if (use_ref)
            tsr_matmul(&args, k, cur->ncores);
        else
            pnn_matmul2(&args, k, cur->ncores);
    }
}

''' + MAIN_HEAD + '''    for (use_ref = 0; use_ref < 2; use_ref++)
        for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const mcase_t *c = &cases[i];
            int8_t *a = arena, *b = a + up4(c->a_bytes), *o = b + up4(c->b_bytes), *s = o + up4(c->out_bytes);
            uint64_t t0;
            memcpy(a, c->a, c->a_bytes);
            memcpy(b, c->b, c->b_bytes);
            memset(o, 0x5A, c->out_bytes);
            memset(&args, 0, sizeof args);
            args.a = a, args.b = b, args.out = o;
            args.out_h = c->bt, args.out_w = c->m, args.out_c = c->n, args.k = c->k, args.b_batch = c->b_batch;
            args.a_offset = c->oa, args.b_offset = c->ob, args.trans_b = c->trans_b;
            if (c->rq) {
                rq_l1 = *c->rq;
                args.rq = &rq_l1;
            }
            args.scratch = s, args.scratch_bytes = c->scratch;
            cur = c;
            t0 = hal_counter();
            hal_fork(body, 0);
            printf("CYCLES %s %u %u\\n", use_ref ? "ref" : "pnn", (unsigned)i, (unsigned)(hal_counter() - t0));
            printf("CASE %s %u ", use_ref ? "ref" : "pnn", (unsigned)i);
            for (j = 0; j < c->out_bytes; j++)
                printf("%02x", (unsigned)(uint8_t)o[j]);
            printf("\\n");
        }
    printf("CASES done\\n");
    return 0;
}
''')
    return "".join(out)


def parse(text):
    got, cycles = {}, {}
    for line in text.splitlines():
        m = re.match(r"CASE (\w+) (\d+) ([0-9a-f]*)$", line.strip())
        if m:
            got[(m.group(1), int(m.group(2)))] = bytes.fromhex(m.group(3))
        m = re.match(r"CYCLES (\w+) (\d+) (\d+)$", line.strip())
        if m:
            cycles[(m.group(1), int(m.group(2)))] = int(m.group(3))
    assert "CASES done" in text, text[-2000:]
    return got, cycles


def run_cases(tmp, isa, cases=CASES):
    from tessera import config, runners

    target = _target()
    defines = config.isa_defines(target) if isa else []
    target["toolchain"]["cflags"] = list(target["toolchain"]["cflags"]) + ["-D" + d for d in defines]
    src = os.path.join(tmp, "cases.c")
    with open(src, "w") as f:
        f.write(firmware_source(cases))
    kernels = sorted(os.path.join(PNN, f) for f in os.listdir(PNN) if f.endswith(".c"))
    kernels += [os.path.join(REF, "matmul.c")] + PNN_FALLBACK
    elf = build_firmware(tmp, [src, *kernels], target)
    return parse(runners.run(target["runner"], elf))


def attention_matmul_cycles(tmp):
    """{case name: (MACs, cycles on pnn_matmul2, cycles on tsr_matmul)} of
    the named (real networks') cases on 8 cores, from one GVSoC run."""
    _, cycles = run_cases(str(tmp), True)
    return {c["name"]: (c["macs"], cycles[("pnn", i)], cycles[("ref", i)]) for i, c in enumerate(CASES) if c["name"]}


@pytest.fixture(scope="module")
def xpulp(tmp_path_factory):
    return run_cases(str(tmp_path_factory.mktemp("att_xpulp")), True)


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c["name"] or f"case{i}" for i, c in enumerate(CASES)])
def test_xpulp_matmul_matches_golden(xpulp, i):
    got, _ = xpulp
    want = CASES[i]["expected"].tobytes()
    assert got[("pnn", i)] == want
    assert got[("ref", i)] == want          # the reference kernel in the same firmware


def test_portable_build_prints_the_same(tmp_path, xpulp):
    got, _ = run_cases(str(tmp_path), False)
    assert {k: v for k, v in got.items() if k[0] == "pnn"} == {k: v for k, v in xpulp[0].items() if k[0] == "pnn"}
