#!/usr/bin/env python3
"""GVSoC benchmark (not a test): a network on PULP-open's cluster with 1 and
with 8 cores, each with the kernels' Xpulpv2 path (the targets as they are,
toolchain.isa: [xpulpv2]) and with the portable RV32IMC path (copies of the
targets with no ISA extension), all built and run in this one invocation:
per-step cycles and MACs per cycle, then per kind of step, with the
speed-ups Xpulp over portable and 8 cores over 1.

    .venv/bin/python benchmarks/pulp_open.py [--model mbv1_025_128] [--target pulp_open]
                                             [--net TARGET:MODEL ...] [--base REF] [--runs all|best]
                                             [--kernels reference] [--out generated/bench]

--base REF also builds the 8-core Xpulp run of another commit (a git ref,
extracted with `git archive` into a temporary folder, or the path of a
checkout) in the same invocation and prints it beside this tree's, per
step and per kind: the before/after table of a change, e.g. `--base main`.
--runs best builds only the 8-core Xpulp run of this tree (with --base, the
two runs a before/after table needs). --fusion POLICY passes fusion= to
every build (none: each kind's kernels apart, with no fused step moving a
layer out of its kind between the two sides). --net TARGET:MODEL (repeated) runs
several networks in the one invocation and ends with one table of every
kind of step, before and after, per network, e.g.

    .venv/bin/python benchmarks/pulp_open.py --base 923390f --runs best \
        --net pulp_open:mbv1_025_128 --net pulp_open_hyper:mbv1_128

--set KEY=VALUE passes a build variable to this tree's builds only (a
variable the base does not know, e.g. chw=1: docs/gvsoc.md).

--model takes a bundled model's name or a model YAML's path
(examples/lstm/trained_lstm.yaml: the recurrent step on 1 and 8 cores).

--kernels runs the targets with
another kernel library (copies of their YAML files). --target takes another
8-core GVSoC target (pulp_open_hyper, gap8_gvsoc); its 1-core twin is a copy
with cores: 1.

Steps, not layers: a fused pair (the fusion selector's steps, report.json's
fusion.groups) is one row whose cycles are both layers' counts and whose
kind names both ops ("pointwise+depthwise"), so the per-kind rows never
mix a fused step into an unfused kind, and a step is compared across runs
only where both runs made the same step (else "-": the runs fused
differently).

Needs GVSoC (docs/gvsoc.md: `gvsoc` on PATH, or $TESSERA_GVSOC). The numbers are GVSoC cycles of the cluster clock:
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

from compare import ROOT, checkout, steps


def build(tree, out, target, model, fusion=None, extra=()):
    """Build, run and check in checkout `tree`; the report of the run.
    extra: more KEY=VALUE variables (--set, this tree's builds only)."""
    cmd = [sys.executable, "-m", "SCons", "-C", tree, "-Q", "-j2", f"out={out}", f"target={target}",
           f"model={model}"] + ([f"fusion={fusion}"] if fusion else []) + list(extra)
    res = subprocess.run(cmd, capture_output=True, text=True)
    name = os.path.basename(target)[:-len(".yaml")] if target.endswith(".yaml") else target
    # a model YAML given by its path builds into its file name's directory
    mname = os.path.basename(model)[:-len(".yaml")] if model.endswith(".yaml") else model
    path = os.path.join(out, name, mname, "report.json")
    if res.returncode != 0 or not os.path.exists(path):
        sys.exit(f"build of {model} on {target} in {tree} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    with open(path) as f:
        return json.load(f)


def variants(tree, target, kernels, tmp, tag, runs):
    """{(cores, isa): target argument} of checkout `tree`: the target and
    its 1-core twin, each as it is (its ISA extensions) and without ISA
    extensions (runs == "all"), or only the target as it is ("best")."""
    import yaml

    with open(os.path.join(tree, "targets", target + ".yaml")) as f:
        base = yaml.safe_load(f)
    isa = "+".join(base["toolchain"].get("isa", [])) or "portable"
    out = {}
    for cores in (1, base["cores"]):
        for ext in (isa, "portable"):
            if runs == "best" and (cores, ext) != (base["cores"], isa):
                continue
            data = json.loads(json.dumps(base))
            data["cores"] = cores
            if cores == 1:
                # the one core takes all the stacks: the same tile budget
                data["description"] = data["description"] + " (1 core)"
            if ext == "portable":
                data["toolchain"]["isa"] = []
            if kernels:
                data["kernels"] = kernels
            name = f"{target}_{cores}c_{ext}" + (f"_{kernels}" if kernels else "") + tag
            path = os.path.join(tmp, name + ".yaml")
            with open(path, "w") as f:
                yaml.safe_dump(data, f, sort_keys=False)
            out[(cores, ext)] = path
    return out, isa, base["cores"]


# DORY on GAP8 silicon, 8 cores, whole network, as published (neither paper
# gives MAC/cycle per layer type for these networks: DORY's only says its
# depthwise kernel reaches 0.54x GreenWaves' CHW one, Sec. 6.3).
DORY = {
    "mbv1_025_128": "DORY 4.4 MAC/cycle unfused, 4.97 with depthwise-pointwise fusion "
                    "(../shared/papers/003_f4ac5c90faadf7de.txt, Table 2)",
    "mbv1_128": "DORY 8.00 MAC/cycle (../shared/papers/000_903d34cf85dc99e4.txt, Table 4)",
}


def row(cells, widths, left=3):
    """The first `left` cells left-aligned, the others right-aligned."""
    return " ".join(f"{c:>{w}}" if i >= left else f"{c:{w}}" for i, (c, w) in enumerate(zip(cells, widths)))


def inside(rep, kind):
    """The share of `kind`'s cycles (every step's for "network") that the
    busiest core spent in the kernel calls (report.json's core_counts: the
    HAL counts each core's time in the functions it forks); None where the
    run has no per-core counts."""
    by = {l["name"]: l for l in rep["layers"]}
    busy = total = 0
    for name, k, _, cycles, names in steps(rep, "cycles"):
        if kind not in ("network", k):
            continue
        counts = [by[n].get("core_counts") for n in names]
        if not all(counts):
            return None
        busy += sum(max(c) for c in counts)
        total += cycles
    return busy / total if total else None


def network(args, target, model, out, tmp):
    """Build, run and print one network's tables; its {kind: (base, new)}
    MAC/cycle (base None without --base)."""
    runs, isa, n = variants(ROOT, target, args.kernels, tmp, "", args.runs)
    reps = {key: build(ROOT, out, path, model, args.fusion, args.set) for key, path in runs.items()}
    if args.base:
        tree = checkout(args.base, tmp) if not os.path.isdir(os.path.join(tmp, "base")) else os.path.join(tmp, "base")
        bruns, bisa, _ = variants(tree, target, args.kernels, tmp, "_base", "best")
        reps["base"] = build(tree, os.path.join(out, "base"), bruns[(n, bisa)], model, args.fusion)
    for key, rep in reps.items():
        if rep["verdict"] != "pass":
            sys.exit(f"{model} on {rep['target']}: {rep['verdict']} (not bit-exact); no numbers")
    best = (n, isa)
    keys = [k for k in [(1, "portable"), (1, isa), (n, "portable"), (n, isa)] if k in reps]
    keys = list(dict.fromkeys(keys))
    if args.base:
        keys = ["base"] + keys
    label = {k: ("base" if k == "base" else f"{k[0]}c {k[1][:8]}") for k in keys}
    print(f"{model} on {target} (GVSoC), bit-exact in all {len(keys)} runs; cycles of the cluster clock"
          + (f"; base: {args.base}" if args.base else "") + (f"; fusion={args.fusion}" if args.fusion else ""))
    mine = {k: {s[0]: s for s in steps(reps[k], "cycles")} for k in keys}
    order = steps(reps[best], "cycles")
    # the ratios: n-core Xpulp over the base (or over n-core portable), and over 1 core
    ref = "base" if args.base else ((n, "portable") if (n, "portable") in reps and isa != "portable" else None)
    one = (1, isa) if (1, isa) in reps and n > 1 else None
    ratios = ([f"{label[ref]}/new"] if ref else []) + ([f"{n}c/1c"] if one else [])
    widths = [3, 16, 28, 9] + [11] * len(keys) + [8] * len(ratios)
    print(row(["#", "step", "kind", "MACs"] + [label[k] for k in keys] + ratios, widths))
    print("-" * (sum(widths) + len(widths)))

    def cyc(k, name):
        s = mine[k].get(name)
        return s[3] if s else None

    for i, (name, kind, macs, cycles, _) in enumerate(order):
        cells = [i, name, kind, macs] + [cyc(k, name) if cyc(k, name) is not None else "-" for k in keys]
        for r in ([ref] if ref else []) + ([one] if one else []):
            c = cyc(r, name)
            cells.append(f"{c / cycles:.2f}" if c else "-")
        print(row(cells, widths))
    print()
    print("MAC/cycle by kind of step" + (f" (base: {args.base})" if args.base else ""))
    kinds = sorted({s[1] for k in keys for s in mine[k].values()},
                   key=lambda o: -sum(s[2] for s in order if s[1] == o))
    widths2 = [28, 10] + [11] * len(keys) + [8] * len(ratios)
    print(row(["kind", "MACs"] + [label[k] for k in keys] + ratios, widths2, 1))

    def rate(k, kind):
        pick = [s for s in mine[k].values() if kind in ("network", s[1])]
        macs, c = sum(s[2] for s in pick), sum(s[3] for s in pick)
        return macs, (macs / c if c else None)

    summary = {}
    for kind in kinds + ["network"]:
        macs = rate(best, kind)[0]
        cells = [kind, macs] + [f"{rate(k, kind)[1]:.3f}" if rate(k, kind)[1] else "-" for k in keys]
        for r in ([ref] if ref else []) + ([one] if one else []):
            a, b = rate(best, kind)[1], rate(r, kind)[1]
            cells.append(f"{a / b:.2f}" if a and b else "-")
        print(row(cells, widths2, 1))
        summary[kind] = (rate("base", kind)[1] if args.base else None, rate(best, kind)[1])
    print()
    print("share of each kind's cycles inside its kernel calls (the busiest core's count; the rest is core 0"
          " alone: the tile loop's code, programming and waiting for the DMA, the fork)")
    print(row(["kind"] + [label[k] for k in keys], [28] + [11] * len(keys), 1))
    for kind in kinds + ["network"]:
        cells = [kind] + [f"{inside(reps[k], kind):.3f}" if inside(reps[k], kind) is not None else "-" for k in keys]
        print(row(cells, [28] + [11] * len(keys), 1))
    if model in DORY:
        print(f"against: {DORY[model]}")
    print(f"whole run incl. the harness's printing, {n} cores: {reps[best]['totals']['cycles']} cycles ({isa})"
          + (f", base {reps['base']['totals']['cycles']}" if args.base else ""))
    print()
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mbv1_025_128")
    ap.add_argument("--target", default="pulp_open")
    ap.add_argument("--net", action="append", metavar="TARGET:MODEL",
                    help="networks to run in this one invocation (instead of --target/--model), each printed "
                         "apart, then one table of every kind before/after")
    ap.add_argument("--out", default=os.path.join(ROOT, "generated", "bench"),
                    help="tessera's output directory (builds there are reused)")
    ap.add_argument("--kernels", help="kernel library instead of the targets' own (e.g. reference)")
    ap.add_argument("--base", metavar="REF", help="also the 8-core Xpulp run of this git ref (or checkout)")
    ap.add_argument("--runs", choices=("all", "best"), default="all",
                    help="all: 1 and n cores, Xpulp and portable; best: n cores, Xpulp only")
    ap.add_argument("--fusion", help="every build's fusion= (default: the builds' default, min_latency); none "
                                     "compares the layer kinds' kernels apart")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a build variable for this tree's builds only, not --base's (e.g. chw=1: a variable "
                         "the base may not know); repeated")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "site_scons"))
    from tessera.runners import gvsoc

    if gvsoc.locate() is None:
        sys.exit("benchmarks/pulp_open.py: `gvsoc` is not on PATH; build GVSoC as docs/gvsoc.md says")
    nets = [tuple(n.split(":", 1)) for n in args.net] if args.net else [(args.target, args.model)]
    for t, m in nets:
        if not t or not m or not os.path.exists(os.path.join(ROOT, "targets", t + ".yaml")):
            sys.exit(f"benchmarks/pulp_open.py: --net {t}:{m}: give a target in targets/ and a model, "
                     "e.g. --net pulp_open_hyper:mbv1_128")
    out = os.path.abspath(args.out)
    with tempfile.TemporaryDirectory(prefix="tessera-bench-") as tmp:
        summaries = [network(args, t, m, out, tmp) for t, m in nets]
    if len(nets) > 1:
        print("MAC/cycle by kind, every network of this run" + (f" (before: {args.base})" if args.base else ""))
        kinds = list(dict.fromkeys(k for s in summaries for k in s if k != "network")) + ["network"]
        cols = [f"{m} ({t})" for t, m in nets]
        print("| kind | " + " | ".join(f"{c} before | after" if args.base else c for c in cols) + " |")
        print("|---|" + "---|" * (len(cols) * (2 if args.base else 1)))
        for kind in kinds:
            cells = []
            for s in summaries:
                before, after = s.get(kind, (None, None))
                fmt = lambda v: f"{v:.2f}" if v else "-"   # noqa: E731
                cells += ([fmt(before)] if args.base else []) + [fmt(after)]
            print(f"| {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
