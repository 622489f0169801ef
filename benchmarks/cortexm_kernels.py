#!/usr/bin/env python3
"""Cortex-M kernel benchmark (not a test): instructions per MAC, by layer
type, of tessera's CMSIS-NN-style kernels against the portable reference
kernels, both measured in the same run: the same network built twice for
the same target, once with the target's kernels (cmsis_nn) and once with a
copy of the target YAML that says `kernels: reference` (each library tiles
with its own library.yaml), run under QEMU, every layer checked bit-exact.

    .venv/bin/python benchmarks/cortexm_kernels.py [--target stm32h7] [--model mbv1_025_128]
                                                   [--cmsis-nn <ARM CMSIS-NN checkout>]

Counts are QEMU instructions (-icount shift=0, read from the board's timer
in steps of 40), whole layers: kernels, the copies standing in for DMA and
the tile loop. --cmsis-nn adds a third column: the same build on ARM's
CMSIS-NN (tessera's glue and semantics, ARM's kernels).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))


def build(out, target, model, *extra):
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", f"out={out}", f"target={target}", f"model={model}",
           *extra]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"build of {model} on {target} failed:\n{res.stderr[-2000:]}")
    name = os.path.splitext(os.path.basename(target))[0]
    # a model YAML given by its path builds into its file name's directory
    mname = os.path.basename(model)[:-len(".yaml")] if model.endswith(".yaml") else model
    with open(os.path.join(out, name, mname, "report.json")) as f:
        rep = json.load(f)
    if rep["verdict"] != "pass":
        sys.exit(f"{model} on {name}: not bit-exact")
    return rep


def by_op(rep):
    """{op: [macs, instructions]} and the totals."""
    ops = {}
    for layer in rep["layers"]:
        row = ops.setdefault(layer["op"], [0, 0])
        row[0] += layer["macs"]
        row[1] += layer["instructions"]
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="stm32h7")
    ap.add_argument("--model", default="mbv1_025_128")
    ap.add_argument("--cmsis-nn", default="", help="an ARM CMSIS-NN checkout, for a third column")
    args = ap.parse_args()

    from tessera.config import load_yaml
    import yaml

    with tempfile.TemporaryDirectory(prefix="tessera-cortexm-") as tmp:
        data = load_yaml(os.path.join(ROOT, "targets", args.target + ".yaml"))
        if data["kernels"] != "cmsis_nn":
            sys.exit(f"{args.target} does not use the cmsis_nn kernels")
        data["kernels"] = "reference"
        ref_target = os.path.join(tmp, f"{args.target}_reference.yaml")
        with open(ref_target, "w") as f:
            yaml.safe_dump(data, f)
        runs = [("cmsis_nn", build(os.path.join(tmp, "out"), args.target, args.model)),
                ("reference", build(os.path.join(tmp, "out"), ref_target, args.model))]
        if args.cmsis_nn:
            runs.append(("ARM CMSIS-NN", build(os.path.join(tmp, "arm"), args.target, args.model,
                                               f"cmsis_nn={os.path.abspath(args.cmsis_nn)}")))

    tables = [(name, by_op(rep)) for name, rep in runs]
    ops = sorted(tables[0][1], key=lambda op: -tables[0][1][op][0])
    print(f"{args.model} on {args.target}: QEMU instructions per MAC by layer type "
          "(whole layers: kernels, DMA copies, tile loop)\n")
    header = f"{'layer type':<12}{'MACs':>12}" + "".join(f"{name:>16}" for name, _ in tables) + f"{'ratio':>10}"
    print(header)
    print("-" * len(header))
    for op in ops:
        macs = tables[0][1][op][0]
        cells = "".join(f"{t[op][1] / max(1, macs):>16.2f}" for _, t in tables)
        ratio = tables[1][1][op][1] / max(1, tables[0][1][op][1])
        print(f"{op:<12}{macs:>12}{cells}{ratio:>9.1f}x")
    totals = [(name, rep["totals"]["instructions"], rep["totals"]["macs"]) for name, rep in runs]
    print("-" * len(header))
    cells = "".join(f"{n / m:>16.2f}" for _, n, m in totals)
    print(f"{'total':<12}{totals[0][2]:>12}{cells}{totals[1][1] / totals[0][1]:>9.1f}x")
    print()
    for name, n, _ in totals:
        print(f"{name}: {n} instructions for the whole network")
    print(f"ratio (reference / cmsis_nn, whole network): {totals[1][1] / totals[0][1]:.2f}")


if __name__ == "__main__":
    main()
