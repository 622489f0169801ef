#!/usr/bin/env python3
"""Activation memory benchmark (not a test): per model and target, the
planned activation peak with segment-level overlap against the lower bound
with those overlaps and the tensor-level bound (whole tensors live at once),
and ST's published figure where there is one.

    .venv/bin/python benchmarks/memory.py [--targets stm32h7 gap8 host] [--models mbv1_128 mbv2_128 dscnn_kws mbv2_035_128]
        [--fusion none|min_memory|min_transfer|min_latency] [--run]

Without --run only the memory plan is built (tiling and planning); the
plan's hazard replay runs as part of it, so every printed plan is proven safe.
`ram` is the firmware's total RAM as the report counts it (per RAM level the
planned peak plus the target's reserved bytes: stacks, C runtime data). A
model with an ST figure is planned on stm32h7 a second time with
ram_cap = 0.9 x ST's total RAM (the row marked "cap"). `in place`: the
layers run from the activation buffers with no tile arena (docs/memory.md).

`tensor` is the network's tensor-level bound: its largest set of whole
tensors live at once, fused or not (with --fusion a fused intermediate never
exists whole, so the plan's own bound, `plan tb`, is lower); `peak/tensor`
the peak over it (`moved` where tensors were moved to a slower level: the
activations did not fit). --run
builds and runs each network too and prints its count (`count`: QEMU
instructions or GVSoC cycles, the report's total; every run bit-exact or
the row says it failed).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "site_scons"))
from tessera.planning import memplan, overlap, rambudget  # noqa: E402
from tessera.ir import Graph  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# STM32Cube.AI 8.1.0 on STM32H7, MobileNetV2-0.35-128 (the figures):
# activations and total RAM (activations plus 32.83 KiB runtime)
ST = {"mbv2_035_128": {"activations": 230574, "total": 258 * 1024}}


def plan(out, target, model, overlap_on, ram_cap=None, fusion="none", run=False):
    net = os.path.join(out, target, model)
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", f"out={out}", f"target={target}", f"model={model}",
           f"overlap={overlap_on}", f"fusion={fusion}"] + ([] if run else [os.path.join(net, "memplan.json")])
    if ram_cap is not None:
        cmd.append(f"ram_cap={ram_cap}")
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return None, None, None, None, (res.stderr.strip().splitlines() or ["failed"])[-1], 0
    with open(os.path.join(net, "memplan.json")) as f:
        the_plan = json.load(f)
    with open(os.path.join(net, "graph.json")) as f:
        tensor = max(overlap.step_floors(Graph.from_json(json.load(f)))[0])
    count = None
    if run:
        with open(os.path.join(net, "report.json")) as f:
            tot = json.load(f)["totals"]
        count = tot.get("instructions", tot.get("cycles"))
    return (the_plan["activations"], rambudget.total_ram(memplan.memory_report(the_plan)), tensor, count, None,
            len(the_plan.get("direct", {})))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=["stm32h7", "gap8", "host"])
    ap.add_argument("--models", nargs="+", default=["mbv1_128", "mbv2_128", "dscnn_kws", "mbv2_035_128"])
    ap.add_argument("--fusion", default="none", help="the fusion policy every network is built with")
    ap.add_argument("--run", action="store_true", help="build and run each network, print its count")
    args = ap.parse_args()
    print(f"{'target':10} {'model':14} {'peak':>8} {'bound':>8} {'plan tb':>8} {'tensor':>8} {'peak/tensor':>11} "
          f"{'moved':>6} {'ram':>8} {'in place':>8} {'ST acts':>8} {'ST ram':>8}" + (f" {'count':>12}" if args.run else ""))
    runs = [(t, m, None) for t in args.targets for m in args.models]
    runs += [("stm32h7", m, int(0.9 * ST[m]["total"])) for m in args.models if m in ST]
    with tempfile.TemporaryDirectory() as out:
        for target, model, cap in runs:
            acts, ram, tensor, count, err, inplace = plan(os.path.join(out, "cap" if cap else "plain"), target, model,
                                                          1, cap, args.fusion, args.run)
            name = model + (" cap" if cap else "")
            if acts is None:
                print(f"{target:10} {name:14} {err[:90]}")
                continue
            moved = len(acts.get("spill", {}).get("offsets", {}))
            # with tensors moved to L3 the level's peak is not the network's
            ratio = "moved" if moved else f"{acts['peak'] / tensor:.3f}"
            st = ST.get(model, {})
            print(f"{target:10} {name:14} {acts['peak']:8} {acts['overlap_bound']:8} {acts['lower_bound']:8} "
                  f"{tensor:8} {ratio:>11} {moved:6} {ram:8} {inplace:8} {st.get('activations', ''):>8} "
                  f"{st.get('total', ''):>8}" + (f" {str(count):>12}" if args.run else ""))

if __name__ == "__main__":
    main()
