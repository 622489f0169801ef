#!/usr/bin/env python3
"""GVSoC benchmark (not a test): a network on PULP-open's cluster with 1 and
with 8 cores, per-layer cycles and MACs per cycle, from tessera's own build
(targets pulp_open_1core and pulp_open: the same chip and tile budget, only
the core count differs).

    .venv/bin/python benchmarks/pulp_open.py [--model mbv1_025_128] [--out generated]
                                             [--kernels reference]

--kernels runs the two targets with another kernel library (copies of their
YAML files, named pulp_open_<library> and pulp_open_1core_<library>).

Needs `gvsoc` on PATH (docs/gvsoc.md). The numbers are GVSoC cycles of the
cluster clock for RV32IMC code without Xpulp (Debian's GCC): measured by the
simulator, deterministic, and not what PULP-NN with Xpulp reaches. A layer's
cycles run from its first DMA to its last output byte back in L2
(hal_counter around the layer); "network" is the sum over layers.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = (("pulp_open_1core", 1), ("pulp_open", 8))


def build(out, target, model):
    """Build, run and check; the report of the run."""
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", "-j2", f"out={out}", f"target={target}",
           f"model={model}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"build of {model} on {target} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    name = os.path.basename(target)[:-len(".yaml")] if target.endswith(".yaml") else target
    with open(os.path.join(out, name, model, "report.json")) as f:
        return json.load(f)


def target_files(kernels, tmp):
    """(target argument, cores, kernel library) of the two runs."""
    import yaml

    runs = []
    for name, cores in TARGETS:
        with open(os.path.join(ROOT, "targets", name + ".yaml")) as f:
            data = yaml.safe_load(f)
        if kernels is None or kernels == data["kernels"]:
            runs.append((name, cores, data["kernels"]))
            continue
        data["kernels"] = kernels
        path = os.path.join(tmp, f"{name}_{kernels}.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(data, f, sort_keys=False)
        runs.append((path, cores, kernels))
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mbv1_025_128")
    ap.add_argument("--out", default=os.path.join(ROOT, "generated"),
                    help="tessera's output directory (builds there are reused)")
    ap.add_argument("--kernels", help="kernel library instead of the targets' own (e.g. reference)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "site_scons"))
    from tessera.runners import gvsoc

    if gvsoc.locate() is None:
        sys.exit("benchmarks/pulp_open.py: `gvsoc` is not on PATH; build GVSoC as docs/gvsoc.md says")
    with tempfile.TemporaryDirectory(prefix="tessera-bench-") as tmp:
        runs = target_files(args.kernels, tmp)
        reps = {cores: build(os.path.abspath(args.out), target, args.model) for target, cores, _ in runs}
    for cores, rep in reps.items():
        if rep["verdict"] != "pass":
            sys.exit(f"{args.model} on {rep['target']}: {rep['verdict']} (not bit-exact); no numbers")
    one, eight = reps[1], reps[8]
    kernels = sorted({k for _, _, k in runs})
    print(f"{args.model} on PULP-open (GVSoC), bit-exact on 1 and 8 cores, kernels: {', '.join(kernels)}")
    print(f"counts: {eight['counts']['note']}")
    head = (f"{'#':>3} {'layer':8} {'op':10} {'MACs':>9} {'cycles 1c':>11} {'MAC/cyc':>8} "
            f"{'cycles 8c':>11} {'MAC/cyc':>8} {'speed-up':>8} {'max/mean core':>13}")
    print(head)
    print("-" * len(head))
    for i, (a, b) in enumerate(zip(one["layers"], eight["layers"])):
        split = b.get("work_split")
        print(f"{i:>3} {a['name']:8} {a['op']:10} {a['macs']:>9} {a['cycles']:>11} {a['macs'] / a['cycles']:>8.3f} "
              f"{b['cycles']:>11} {b['macs'] / b['cycles']:>8.3f} {a['cycles'] / b['cycles']:>7.2f}x "
              f"{'' if split is None else format(split, '.2f'):>13}")
    macs = sum(layer["macs"] for layer in one["layers"])
    c1 = sum(layer["cycles"] for layer in one["layers"])
    c8 = sum(layer["cycles"] for layer in eight["layers"])
    print("-" * len(head))
    print(f"{'':3} {'network':8} {'':10} {macs:>9} {c1:>11} {macs / c1:>8.3f} {c8:>11} {macs / c8:>8.3f} "
          f"{c1 / c8:>7.2f}x {eight['totals'].get('work_split', ''):>13}")
    print(f"whole run incl. the harness's printing: {one['totals']['cycles']} cycles (1 core), "
          f"{eight['totals']['cycles']} cycles (8 cores)")


if __name__ == "__main__":
    main()
