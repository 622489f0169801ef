#!/usr/bin/env python3
"""GVSoC benchmark (not a test): a network on PULP-open's cluster with 1 and
with 8 cores, each with the kernels' Xpulpv2 path (the targets as they are,
toolchain.isa: [xpulpv2]) and with the portable RV32IMC path (copies of the
targets with no ISA extension), all built and run in this one invocation:
per-layer cycles and MACs per cycle, then per layer type, with the
speed-ups Xpulp over portable and 8 cores over 1.

    .venv/bin/python benchmarks/pulp_open.py [--model mbv1_025_128] [--out generated]
                                             [--kernels reference] [--target pulp_open]

--model takes a bundled model's name or a model YAML's path
(examples/lstm/trained_lstm.yaml: the recurrent step on 1 and 8 cores).

--kernels runs the targets with another kernel library (copies of their
YAML files). --target takes another 8-core GVSoC target (e.g. gap8_gvsoc);
its 1-core twin is a copy with cores: 1.

Needs GVSoC (docs/gvsoc.md: `gvsoc` on PATH, or the prebuilt copy beside
the checkout). The numbers are GVSoC cycles of the cluster clock:
measured by the simulator, deterministic. A layer's cycles run from its
first DMA to its last output byte back in L2 (hal_counter around the
layer); "network" is the sum over layers.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(out, target, model):
    """Build, run and check; the report of the run."""
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", "-j2", f"out={out}", f"target={target}",
           f"model={model}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"build of {model} on {target} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    name = os.path.basename(target)[:-len(".yaml")] if target.endswith(".yaml") else target
    # a model YAML given by its path builds into its file name's directory
    mname = os.path.basename(model)[:-len(".yaml")] if model.endswith(".yaml") else model
    with open(os.path.join(out, name, mname, "report.json")) as f:
        return json.load(f)


def variants(target, kernels, tmp):
    """{(cores, isa): target argument}: the target and its 1-core twin, each
    as it is (its ISA extensions) and without ISA extensions."""
    import yaml

    with open(os.path.join(ROOT, "targets", target + ".yaml")) as f:
        base = yaml.safe_load(f)
    isa = "+".join(base["toolchain"].get("isa", [])) or "portable"
    runs = {}
    for cores in (1, base["cores"]):
        for ext in (isa, "portable"):
            data = json.loads(json.dumps(base))
            data["cores"] = cores
            if cores == 1:
                # the one core takes all the stacks: the same tile budget
                data["description"] = data["description"] + " (1 core)"
            if ext == "portable":
                data["toolchain"]["isa"] = []
            if kernels:
                data["kernels"] = kernels
            name = f"{target}_{cores}c_{ext}" + (f"_{kernels}" if kernels else "")
            path = os.path.join(tmp, name + ".yaml")
            with open(path, "w") as f:
                yaml.safe_dump(data, f, sort_keys=False)
            runs[(cores, ext)] = path
    return runs, isa, base["cores"]


# DORY on GAP8 silicon, 8 cores, whole network, as published (neither paper
# gives MAC/cycle per layer type for these networks: DORY's only says its
# depthwise kernel reaches 0.54x GreenWaves' CHW one, Sec. 6.3).
DORY = {
    "mbv1_025_128": "DORY 4.4 MAC/cycle unfused, 4.97 with depthwise-pointwise fusion "
                    "(../shared/papers/003_f4ac5c90faadf7de.txt, Table 2)",
    "mbv1_128": "DORY 8.00 MAC/cycle (../shared/papers/000_903d34cf85dc99e4.txt, Table 4)",
}


def row(cells, widths):
    return " ".join(f"{c:>{w}}" if i > 2 else f"{c:{w}}" for i, (c, w) in enumerate(zip(cells, widths)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mbv1_025_128")
    ap.add_argument("--target", default="pulp_open")
    ap.add_argument("--out", default=os.path.join(ROOT, "generated", "bench"),
                    help="tessera's output directory (builds there are reused)")
    ap.add_argument("--kernels", help="kernel library instead of the targets' own (e.g. reference)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "site_scons"))
    from tessera.runners import gvsoc

    if gvsoc.locate() is None:
        sys.exit("benchmarks/pulp_open.py: `gvsoc` is not on PATH; build GVSoC as docs/gvsoc.md says")
    out = os.path.abspath(args.out)
    with tempfile.TemporaryDirectory(prefix="tessera-bench-") as tmp:
        runs, isa, n = variants(args.target, args.kernels, tmp)
        reps = {key: build(out, path, args.model) for key, path in runs.items()}
    for key, rep in reps.items():
        if rep["verdict"] != "pass":
            sys.exit(f"{args.model} on {rep['target']}: {rep['verdict']} (not bit-exact); no numbers")
    keys = [(1, "portable"), (1, isa), (n, "portable"), (n, isa)] if isa != "portable" else [(1, isa), (n, isa)]
    print(f"{args.model} on {args.target} (GVSoC), bit-exact in all {len(keys)} runs; cycles of the cluster clock")
    widths = [3, 8, 10, 9] + [11] * len(keys) + [8, 8]
    head = ["#", "layer", "op", "MACs"] + [f"{c}c {e[:8]}" for c, e in keys] + [f"{n}c x", f"{n}c/1c"]
    print(row(head, widths))
    print("-" * (sum(widths) + len(widths)))
    best, base = (n, isa), (n, "portable") if isa != "portable" else (n, isa)
    layers = reps[best]["layers"]
    for i, layer in enumerate(layers):
        cyc = [reps[k]["layers"][i]["cycles"] for k in keys]
        print(row([i, layer["name"], layer["op"], layer["macs"]] + cyc
                  + [f"{reps[base]['layers'][i]['cycles'] / layer['cycles']:.2f}",
                     f"{reps[(1, isa)]['layers'][i]['cycles'] / layer['cycles']:.2f}"], widths))
    print()
    print(f"MAC/cycle by layer type (x: {n}-core {isa} over {n}-core portable)")
    ops = sorted({l["op"] for l in layers}, key=lambda o: -sum(l["macs"] for l in layers if l["op"] == o))
    widths2 = [10, 10] + [11] * len(keys) + [8]
    print(row(["op", "MACs"] + [f"{c}c {e[:8]}" for c, e in keys] + ["x"], widths2))
    for op in ops + ["network"]:
        pick = [i for i, l in enumerate(layers) if op in ("network", l["op"])]
        macs = sum(layers[i]["macs"] for i in pick)
        cyc = {k: sum(reps[k]["layers"][i]["cycles"] for i in pick) for k in keys}
        print(row([op, macs] + [f"{macs / cyc[k]:.3f}" for k in keys] + [f"{cyc[base] / cyc[best]:.2f}"],
                  widths2))
    if args.model in DORY:
        print(f"against: {DORY[args.model]}")
    print(f"whole run incl. the harness's printing, {n} cores: {reps[best]['totals']['cycles']} cycles ({isa})"
          + (f", {reps[base]['totals']['cycles']} (portable)" if base != best else ""))


if __name__ == "__main__":
    main()
