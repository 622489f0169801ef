#!/usr/bin/env python3
"""Cortex-M kernel benchmark (not a test): instructions per MAC, by layer
type, of tessera's CMSIS-NN-style kernels against the portable reference
kernels (and ARM's CMSIS-NN), all measured in the same run: the same
network built for the same target with the target's kernels (cmsis_nn),
with a copy of the target YAML that says `kernels: reference` (each library
tiles with its own library.yaml), and with `cmsis_nn=<checkout>` (ARM's
kernels in tessera's glue, the same tiles), run under QEMU, every layer
checked bit-exact. Layers run tiled in every build (`direct=0`: ARM's
kernels have no in-place model), with the target's default fusion; a fused
step is a layer type of its own (its count is the whole step's), never
mixed into its layers' rows.

    .venv/bin/python benchmarks/cortexm_kernels.py [--target stm32h7] [--model mbv1_025_128]
                                                   [--cmsis-nn <ARM CMSIS-NN checkout>] [--fusion none]

Counts are QEMU instructions (-icount shift=0, read from the board's timer
in steps of 40), whole layers: kernels, the copies standing in for DMA and
the tile loop.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))


def build(out, target, model, *extra, tree=ROOT):
    """The report of `model` (a name or a YAML path) built and run on
    `target` (a name or a YAML path) into `out` by the checkout `tree`;
    exits unless bit-exact."""
    cmd = [sys.executable, "-m", "SCons", "-C", tree, "-Q", "-j2", f"out={out}", f"target={target}",
           f"model={model}", *extra]
    res = subprocess.run(cmd, capture_output=True, text=True)
    what = f"{model} on {target}" + (f" ({' '.join(extra)})" if extra else "")
    if res.returncode != 0:
        sys.exit(f"the build of {what} failed:\n{res.stderr[-2000:]}")
    name, mname = (os.path.splitext(os.path.basename(p))[0] for p in (target, model))
    with open(os.path.join(out, name, mname, "report.json")) as f:
        rep = json.load(f)
    if rep["verdict"] != "pass":
        sys.exit(f"{what}: not bit-exact")
    return rep


def kinds(rep):
    """{kind: [macs, instructions]}: the layers' ops, and each fused step as
    `<op>+<op> (fused)` with its whole count (on its first layer; the
    others' counts are the step's bookkeeping and go with it)."""
    groups = {name: g for g in rep.get("fusion", {}).get("groups", []) for name in g["layers"]}
    ops = {layer["name"]: layer["op"] for layer in rep["layers"]}
    out = {}
    for layer in rep["layers"]:
        g = groups.get(layer["name"])
        kind = "+".join(ops[n] for n in g["layers"]) + " (fused)" if g else layer["op"]
        row = out.setdefault(kind, [0, 0])
        row[0] += layer["macs"]
        row[1] += layer["instructions"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="stm32h7")
    ap.add_argument("--model", default="mbv1_025_128")
    ap.add_argument("--cmsis-nn", default="", help="an ARM CMSIS-NN checkout, for a third column")
    ap.add_argument("--fusion", default="", help="a fusion policy for every build (default: the target's)")
    args = ap.parse_args()

    from tessera.config import load_yaml
    import yaml

    extra = ["direct=0"] + ([f"fusion={args.fusion}"] if args.fusion else [])
    with tempfile.TemporaryDirectory(prefix="tessera-cortexm-") as tmp:
        data = load_yaml(os.path.join(ROOT, "targets", args.target + ".yaml"))
        if data["kernels"] != "cmsis_nn":
            sys.exit(f"{args.target} does not use the cmsis_nn kernels")
        data["kernels"] = "reference"
        ref_target = os.path.join(tmp, f"{args.target}_reference.yaml")
        with open(ref_target, "w") as f:
            yaml.safe_dump(data, f)
        runs = [("cmsis_nn", build(os.path.join(tmp, "out"), args.target, args.model, *extra)),
                ("reference", build(os.path.join(tmp, "out"), ref_target, args.model, *extra))]
        if args.cmsis_nn:
            runs.append(("ARM CMSIS-NN", build(os.path.join(tmp, "arm"), args.target, args.model, *extra,
                                               f"cmsis_nn={os.path.abspath(args.cmsis_nn)}")))

    tables = [(name, kinds(rep)) for name, rep in runs]
    ours = tables[0][1]
    print(f"{args.model} on {args.target}: QEMU instructions per MAC by layer type "
          "(whole layers: kernels, DMA copies, tile loop; fused steps apart)\n")
    ratio_names = ["reference/cmsis_nn"] + (["cmsis_nn/ARM"] if args.cmsis_nn else [])
    header = (f"{'layer type':<30}{'MACs':>10}" + "".join(f"{name:>14}" for name, _ in tables)
              + "".join(f"{r:>20}" for r in ratio_names))
    print(header)
    print("-" * len(header))

    def ratios(get):
        out = f"{get(1) / max(1, get(0)):>19.2f}x"
        if args.cmsis_nn:
            out += f"{get(0) / max(1, get(2)):>19.3f}x"
        return out
    for kind in sorted(ours, key=lambda k: -ours[k][1]):
        macs = ours[kind][0]
        cells = "".join(f"{t.get(kind, [0, 0])[1] / max(1, macs):>14.2f}" for _, t in tables)
        print(f"{kind:<30}{macs:>10}{cells}" + ratios(lambda i: tables[i][1].get(kind, [0, 0])[1]))
    totals = [(name, rep["totals"]["instructions"], rep["totals"]["macs"]) for name, rep in runs]
    print("-" * len(header))
    cells = "".join(f"{n / m:>14.2f}" for _, n, m in totals)
    print(f"{'total':<30}{totals[0][2]:>10}{cells}" + ratios(lambda i: totals[i][1]))
    print()
    for name, n, _ in totals:
        print(f"{name}: {n} instructions for the whole network")

if __name__ == "__main__":
    main()
