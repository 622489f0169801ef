#!/usr/bin/env python3
"""Patched steps benchmark (not a test): per model and target, three layouts
built and run in one go, every run checked bit-exact:

    fastest        the default build (fusion min_latency, no cap): large
                   tiles, no RAM need, so nothing is patched
    single-layer   the least RAM planning single layers reaches: stm32 with
                   a ram_cap at the least total the tile budget ladder finds
                   with patch=0; host and gap8 fusion=none (segment overlap,
                   row bands at the peak)
    patched        stm32h7: ram_cap (default 0.55 x ST X-CUBE-AI's 258 KiB);
                   stm32f4: the default build (nothing else fits); host and
                   gap8: fusion=min_memory

and prints per layout the activation peak, the network's tensor-level bound
(its largest set of whole tensors live at once, layers apart) and their
ratio, the total RAM (the report's: per RAM level the planned peak plus the
target's reserved bytes), the count (QEMU instructions, or nothing on the
host) and its ratio to the fastest layout's, and the patched steps. Where
single layers cannot fit at all it says by how much (the plan's one line,
and the activation floor against the level's usable bytes).

    .venv/bin/python benchmarks/patch.py [--only stm32h7:mbv2_035_128 ...] [--cap 145300]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "site_scons"))
from tessera import config  # noqa: E402
from tessera.config import views  # noqa: E402
from tessera.ir import Graph  # noqa: E402
from tessera.planning import memplan, overlap, rambudget  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ST_TOTAL = 258 * 1024      # ST X-CUBE-AI 8.1.0, MobileNetV2-0.35-128 on STM32H7 (docs/memory.md)
CASES = ["stm32h7:mbv2_035_128", "stm32f4:mbv2_035_160", "host:mbv2_128", "gap8:mbv2_128"]


def build(out, target, model, *args):
    """(report.json's data or None, memplan.json's or None, the error line)."""
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", "-j2", f"out={out}", f"target={target}", f"model={model}",
           *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
    net = os.path.join(out, target, model)
    if res.returncode != 0:
        lines = [ln for ln in res.stderr.splitlines() if ln.startswith("tessera: error:")]
        return None, None, (lines or res.stderr.strip().splitlines() or ["failed"])[-1]
    with open(os.path.join(net, "report.json")) as f:
        rep = json.load(f)
    with open(os.path.join(net, "memplan.json")) as f:
        plan = json.load(f)
    with open(os.path.join(net, "schedule.json")) as f:
        sched = json.load(f)
    rep["patched_steps"] = [(s["step"], s["patch"]["patches"], s["patch"]["policy"]) for s in sched["steps"]
                            if s["kind"] == "patch"]
    return rep, plan, None


def least_single_layer(out, target, model):
    """The least total RAM the tile budget ladder reaches without patched
    steps (the budget step's error lists every rung; it names the least)."""
    _, _, err = build(out, target, model, "ram_cap=1", "patch=0", os.path.join(out, target, model, "ram_budget.json"))
    m = re.search(r"the least is (\d+)", err or "")
    return int(m.group(1)) if m else None


def layouts(target, model, cap):
    if target == "stm32h7":
        return [("fastest", []), ("single-layer", ["patch=0", "ram_cap=LEAST"]), ("patched", [f"ram_cap={cap}"])]
    if target == "stm32f4":
        return [("fastest", ["patch=0"]), ("single-layer", ["patch=0", "ram_cap=LEAST"]), ("patched", [])]
    return [("fastest", []), ("single-layer", ["fusion=none"]), ("patched", ["fusion=min_memory"])]


def floors(out, target, model):
    """(tensor-level bound, overlap floor, activation level's usable bytes)
    of the layers apart."""
    with open(os.path.join(out, target, model, "graph.json")) as f:
        graph = Graph.from_json(json.load(f))
    live, fl = overlap.step_floors(graph)
    tcfg = config.load_target(os.path.join(ROOT, "targets", f"{target}.yaml"), target)
    mem = views.memory_target(tcfg)
    return max(live), max(fl), mem["levels"][mem["place"]["activations"]]["usable"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", default=CASES, help="target:model pairs")
    ap.add_argument("--cap", type=int, default=145300, help="stm32h7's ram_cap for the patched row (0.55 x ST's "
                    f"{ST_TOTAL} B, rounded down)")
    args = ap.parse_args()
    print(f"{'target':8} {'model':14} {'layout':13} {'peak':>8} {'tensor':>8} {'ratio':>6} {'RAM':>8} "
          f"{'count':>12} {'x fastest':>9}  patched steps / why not")
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.only:
            target, model = case.split(":")
            fastest = None
            for name, extra in layouts(target, model, args.cap):
                out = os.path.join(tmp, name)
                if "ram_cap=LEAST" in extra:
                    least = least_single_layer(out, target, model)
                    extra = [e for e in extra if e != "ram_cap=LEAST"] + ([f"ram_cap={least}"] if least else [])
                    if least is None:
                        print(f"{target:8} {model:14} {name:13} no ram_cap fits without patched steps")
                        continue
                rep, plan, err = build(out, target, model, *extra)
                if rep is None:
                    tb, fl, usable = floors(out, target, model) if os.path.exists(
                        os.path.join(out, target, model, "graph.json")) else (0, 0, 0)
                    print(f"{target:8} {model:14} {name:13} does not fit: whole tensors {tb} B, with every overlap "
                          f"{fl} B, the activation level {usable} B (over by {fl - usable} B): {err[:140]}")
                    continue
                tb = floors(out, target, model)[0]
                peak = plan["activations"]["peak"]
                ram = rambudget.total_ram(memplan.memory_report(plan))
                key = "instructions" if "instructions" in rep["totals"] else "cycles" \
                    if "cycles" in rep["totals"] else None
                count = rep["totals"].get(key) if key else None
                if name == "fastest":
                    fastest = count
                ratio = f"{count / fastest:.3f}" if count and fastest else ""
                exact = "" if rep["verdict"] == "pass" else " NOT BIT-EXACT"
                steps = ", ".join(f"{s} ({n} {p})" for s, n, p in rep["patched_steps"]) or "none"
                print(f"{target:8} {model:14} {name:13} {peak:8} {tb:8} {peak / tb:6.3f} {ram:8} "
                      f"{str(count or ''):>12} {ratio:>9}  {' '.join(extra)}: {steps}{exact}")


if __name__ == "__main__":
    main()
