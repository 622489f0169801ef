#!/usr/bin/env python3
"""GAP8 benchmark (not a test): a network on targets/gap8.yaml under QEMU,
one fabric-controller hart and eight cluster harts, bit-exact. Prints per
layer the instructions QEMU counted, instructions per MAC, the part spent in
emulated DMA copies, and how the cluster cores shared the work (each core's
instructions inside the forked kernels: max core / mean core, 1.00 is an
even split), then the totals.

    .venv/bin/python benchmarks/gap8.py [--model mbv1_128] [--out DIR] [--baseline reference]
                                        [--base REF]

--baseline KERNELS builds the same network a second time with another
kernel library (e.g. the portable reference kernels) in the same run, and
prints both columns. --base REF builds it a second time from another commit
(a git ref, extracted with `git archive`, or a checkout's path) in the same
run and prints both, step by step (a fused pair is one step; "-" where the
two builds fused differently) and in total: the before/after of a change.

The counts are QEMU instructions of RV32IMC code summed over the harts
(-icount shift=0), not GAP8 cycles: GAP8's Xpulp SIMD dot products and
hardware loops are not emulated, and DMA copies, which GAP8's engines do,
are done by a hart here (shown apart).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from compare import ROOT, checkout, steps


def build(out, target, model, tree=ROOT):
    """Build, run and check (in checkout `tree`); the report, with each
    layer's per-core counts from a second run of the firmware that prints
    them (`cores`)."""
    cmd = [sys.executable, "-m", "SCons", "-C", tree, "-Q", f"out={out}", f"target={target}", f"model={model}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    name = os.path.basename(target).replace(".yaml", "")
    netdir = os.path.join(out, name, model)
    if res.returncode != 0 or not os.path.exists(os.path.join(netdir, "report.json")):
        sys.exit(f"build of {model} on {target} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    with open(os.path.join(netdir, "report.json")) as f:
        rep = json.load(f)
    sys.path.insert(0, os.path.join(ROOT, "site_scons"))
    from tessera import config, runners
    from tessera.check import runlog

    tcfg = config.load_target(*reversed(config.resolve("target", target, tree)))
    run = runlog.parse(runners.run(tcfg["runner"], os.path.join(netdir, "firmware.elf"), ["cores"]), "profile run")
    for layer, counted in zip(rep["layers"], run["layers"]):
        assert counted["count"] == layer["instructions"], "counts differ between runs"
        layer["core_counts"], layer["dma_copy_count"] = counted["cores"], counted["dma_count"]
    rep["totals"]["core_counts"] = [sum(c) for c in zip(*(l["core_counts"] for l in rep["layers"]))]
    rep["totals"]["dma_copy_count"] = sum(l["dma_copy_count"] for l in rep["layers"])
    rep["totals"]["core_count_overlaps"] = run.get("core_overlaps", 0)
    return rep


def split(counts):
    """max core / mean core."""
    return max(counts) / (sum(counts) / len(counts)) if sum(counts) else 0.0


def baseline_target(kernels, tmp):
    """targets/gap8.yaml with another kernel library."""
    with open(os.path.join(ROOT, "targets", "gap8.yaml")) as f:
        text = f.read()
    path = os.path.join(tmp, f"gap8_{kernels}.yaml")
    with open(path, "w") as f:
        f.write(text.replace("kernels: pulp_nn", f"kernels: {kernels}"))
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mbv1_128")
    ap.add_argument("--out", default=os.path.join(ROOT, "generated"), help="where the build goes")
    ap.add_argument("--baseline", metavar="KERNELS", help="also build with this kernel library (e.g. reference)")
    ap.add_argument("--base", metavar="REF", help="also build from this git ref (or checkout): before/after")
    args = ap.parse_args()

    rep = build(args.out, "gap8", args.model)
    base = before = None
    with tempfile.TemporaryDirectory(prefix="tessera-gap8-") as tmp:
        if args.baseline:
            base = build(os.path.join(tmp, "out"), baseline_target(args.baseline, tmp), args.model)
        if args.base:
            before = build(os.path.join(tmp, "before"), "gap8", args.model, checkout(args.base, tmp))
    for r in (rep, base, before):
        if r is not None and r["verdict"] != "pass":
            sys.exit(f"{args.model} on gap8 is not bit-exact: {r['verdict']}")

    cores = len(rep["totals"]["core_counts"])
    print(f"{args.model} on gap8 under QEMU: 1 fabric controller + {cores} cluster harts, bit-exact "
          f"({rep['totals']['macs']} MACs)")
    print(f"counts: {rep['counts']['note']}\n")
    head = f"{'#':>3} {'layer':<7} {'op':<10} {'MACs':>10} {'instructions':>13} {'/MAC':>6} {'DMA copies':>11} " \
           f"{'max core':>11} {'mean core':>11} {'max/mean':>8}"
    if base:
        head += f" {args.baseline + ' instr':>18} {'ratio':>6}"
    print(head)
    print("-" * len(head))
    for i, layer in enumerate(rep["layers"]):
        counts = layer["core_counts"]
        mean = sum(counts) / len(counts)
        line = (f"{i:>3} {layer['name']:<7} {layer['op']:<10} {layer['macs']:>10} {layer['instructions']:>13} "
                f"{layer['instructions'] / max(layer['macs'], 1):>6.2f} {layer['dma_copy_count']:>11} "
                f"{max(counts):>11} {mean:>11.0f} {split(counts):>8.2f}")
        if base:
            b = base["layers"][i]["instructions"]
            line += f" {b:>18} {b / layer['instructions']:>6.2f}"
        print(line)
    tot = rep["totals"]
    counts = tot["core_counts"]
    mean = sum(counts) / len(counts)
    print("-" * len(head))
    line = (f"{'':>3} {'total':<7} {'':<10} {tot['macs']:>10} {tot['instructions']:>13} "
            f"{tot['instructions'] / tot['macs']:>6.2f} {tot['dma_copy_count']:>11} {max(counts):>11} "
            f"{mean:>11.0f} {split(counts):>8.2f}")
    if base:
        b = base["totals"]["instructions"]
        line += f" {b:>18} {b / tot['instructions']:>6.2f}"
    print(line)
    in_cores = sum(counts)
    print(f"\ninstructions in the cluster cores' kernels: {in_cores} ({in_cores / tot['instructions']:.1%} of the "
          f"total); the rest is the fabric controller (tile loops, DMA set-up and the emulated copies) and "
          f"the fork/join handshakes")
    print(f"critical path estimate (fabric controller + the busiest core of every layer): "
          f"{tot['instructions'] - in_cores + sum(max(l['core_counts']) for l in rep['layers'])}")
    ws = tot.get("weights_streamed")
    if ws:
        print(f"weights: {ws['bytes']} bytes streamed from {ws['from']} through {ws['through']} in {ws['chunks']} "
              f"chunks; DMA bytes: " + ", ".join(f"{k} {v}" for k, v in tot["dma_bytes"].items()))
    if before:
        mine = {s[0]: s for s in steps(before, "instructions")}
        print(f"\nbefore/after, instructions (QEMU): {args.base} / this tree")
        print(f"{'step':<14} {'kind':<28} {'before':>13} {'after':>13} {'before/after':>12}")
        for name, kind, _, count, _ in steps(rep, "instructions"):
            b = mine.get(name)
            print(f"{name:<14} {kind:<28} {b[3] if b else '-':>13} {count:>13} "
                  + (f"{b[3] / count:>12.3f}" if b else f"{'-':>12}"))
        b, a = before["totals"]["instructions"], tot["instructions"]
        print(f"{'network':<14} {'':<28} {b:>13} {a:>13} {b / a:>12.3f}")
    if tot.get("core_count_overlaps"):
        print(f"note: in {tot['core_count_overlaps']} forks QEMU switched harts mid-kernel in a way the per-core "
              "split cannot undo exactly (totals are exact)")


if __name__ == "__main__":
    main()
