#!/usr/bin/env python3
"""Attention benchmark (not a test, issue 27): a transformer built, run and
checked on a target with its optimized kernels and on a copy of the target
with the reference kernels, in this one invocation; per-op and whole-network
work against that baseline.

    .venv/bin/python benchmarks/attention.py [--model tests/corpus/torch_kws_transformer.yaml]
                                             [--targets pulp_open,stm32h7] [--no-kernels] [--out DIR]

pulp_open (GVSoC, 8 cores, PULP-NN-style Xpulp kernels): cycles and MAC/cycle
of the network, of each op type and of the attention products (the IR's
matmul of two activations: Q.K^T and P.V), then the attention products'
kernels alone (tests/test_attention_gvsoc.py's firmware: pnn_matmul2 against
tsr_matmul on the same shapes) and the row-wise kernels alone
(tests/test_attention_rowwise_gvsoc.py: pnn_softmax, pnn_layernorm, pnn_lut
against the reference kernels). stm32h7 (QEMU, CMSIS-NN-style kernels):
instructions of the same, against the reference kernels. Every build is
checked bit for bit against the golden model before a number is printed.
The numbers are the simulators' counts (GVSoC cycles of the cluster clock,
QEMU's instruction count): deterministic.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "site_scons"), os.path.join(ROOT, "tests")]
COUNTERS = {"pulp_open": "cycles", "stm32h7": "instructions"}


def build(out, target, model):
    """Build, run and check; the report of the run (exit on failure or mismatch)."""
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", "-j2", f"out={out}", f"target={target}", f"model={model}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"build of {model} on {target} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    name = os.path.basename(target)[:-len(".yaml")] if target.endswith(".yaml") else target
    with open(os.path.join(out, name, os.path.basename(model)[:-len(".yaml")], "report.json")) as f:
        rep = json.load(f)
    if rep["verdict"] != "pass":
        sys.exit(f"{model} on {target}: verdict {rep['verdict']}")
    return rep


def reference_twin(target, tmp):
    """A copy of targets/<target>.yaml with the reference kernels."""
    import yaml

    with open(os.path.join(ROOT, "targets", target + ".yaml")) as f:
        data = yaml.safe_load(f)
    data["kernels"] = "reference"
    data["description"] += " (reference kernels)"
    path = os.path.join(tmp, f"{target}_reference.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(data, f, sort_keys=False)
    return path


def by_op(rep, counter):
    """{op: (layers, MACs, count)} and the network's (MACs, count)."""
    rows = {}
    for layer in rep["layers"]:
        n, macs, count = rows.get(layer["op"], (0, 0, 0))
        rows[layer["op"]] = (n + 1, macs + layer["macs"], count + (layer.get(counter) or 0))
    total = (sum(r[1] for r in rows.values()), sum(r[2] for r in rows.values()))
    return rows, total


def table(target, opt, ref, counter):
    per = "MAC/cycle" if counter == "cycles" else "MAC/instr"
    (rows, (macs, count)), (ref_rows, (_, ref_count)) = by_op(opt, counter), by_op(ref, counter)
    lib = opt.get("kernels", {}).get("library", "optimized") if isinstance(opt.get("kernels"), dict) else "optimized"
    print(f"\n{target}: {counter}, {lib} kernels against the reference kernels (same model, same run)\n")
    print(f"| op | layers | MACs | {counter} | {per} | reference {counter} | reference {per} | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for op in sorted(rows, key=lambda o: -rows[o][2]):
        n, m, c = rows[op]
        rc = ref_rows[op][2]
        print(f"| {op}{' (attention products)' if op == 'matmul' else ''} | {n} | {m} | {c} | "
              f"{m / c if c else 0:.3f} | {rc} | {m / rc if rc else 0:.3f} | {rc / c if c else 0:.2f}x |")
    print(f"| **network** | {len(opt['layers'])} | {macs} | {count} | {macs / count:.3f} | {ref_count} | "
          f"{macs / ref_count:.3f} | {ref_count / count:.2f}x |")


def kernel_table(title, what, lib, unit, measure):
    """One table of kernels alone: `measure(tmp)` gives {name: (work, optimized, reference)}."""
    with tempfile.TemporaryDirectory(prefix="tessera-attn-kbench-") as tmp:
        rows = measure(tmp)
    print(f"\n{title}\n")
    print(f"| shape | {what} | {lib} {unit} | {what}/{unit[:-1]} | reference {unit} | {what}/{unit[:-1]} | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (work, opt, ref) in rows.items():
        print(f"| {name} | {work} | {opt} | {work / opt:.3f} | {ref} | {work / ref:.3f} | {ref / opt:.2f}x |")


def kernels_tables(targets):
    import pathlib

    if "pulp_open" in targets:
        import test_attention_gvsoc as T
        import test_attention_rowwise_gvsoc as R

        kernel_table("pulp_open kernels alone (8 cores, operands in L1): pnn_matmul2 (Xpulp) against tsr_matmul",
                     "MACs", "pnn_matmul2", "cycles", T.attention_matmul_cycles)
        kernel_table("pulp_open row-wise kernels alone (8 cores, operands in L1): pnn_softmax, pnn_layernorm, "
                     "pnn_lut against the reference kernels", "values", "pulp_nn", "cycles", R.rowwise_cycles)
    if "stm32h7" in targets:
        import test_attention_rowwise_qemu as Q

        kernel_table("stm32h7 row-wise kernels alone (QEMU): tsr_cmsis_softmax, tsr_cmsis_layernorm, tsr_cmsis_lut "
                     "against the reference kernels", "values", "cmsis_nn", "instructions",
                     lambda tmp: Q.rowwise_instructions(pathlib.Path(tmp)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="tests/corpus/torch_kws_transformer.yaml")
    ap.add_argument("--targets", default="pulp_open,stm32h7")
    ap.add_argument("--no-kernels", action="store_true", help="skip the kernel-alone tables")
    ap.add_argument("--out", default=None, help="build directory (default: a temporary one)")
    args = ap.parse_args()
    model = os.path.abspath(os.path.join(ROOT, args.model)) if not os.path.isabs(args.model) else args.model
    with tempfile.TemporaryDirectory(prefix="tessera-attn-bench-") as tmp:
        out = args.out or os.path.join(tmp, "out")
        for target in args.targets.split(","):
            counter = COUNTERS[target]
            opt = build(out, target, model)
            ref = build(out, reference_twin(target, tmp), model)
            table(target, opt, ref, counter)
    if not args.no_kernels:
        kernels_tables(args.targets.split(","))


if __name__ == "__main__":
    main()
