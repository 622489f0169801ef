#!/usr/bin/env python3
"""Out-of-core benchmark (not a test; docs/out_of_core.md): networks far
larger than the MCU built, run under QEMU and checked bit for bit on
stm32f746_sd, with what their report says about the SD card: bytes and
transfers each way, IO-bound layers, compute and IO time, the in-order
time, and (where the scheduler is part of the checkout) its per-frame
latency against unlimited SRAM and its pipelined throughput; and for every
run the card's lower bound (no program with the run's tiles and pools is
faster; docs/out_of_core_schedule.md) against what the run takes.

    .venv/bin/python benchmarks/out_of_core.py [--models vgg16_64 mbv1_128 alexnet_64] [--out generated]
        [--what-if-read-bandwidth 25000000]
    .venv/bin/python benchmarks/out_of_core.py --target stm32f746_sd_sched --models mbv1_128 alexnet_64
        (the program with dedicated pools: the target keeps SRAM for them; on stm32f746_sd
        the pools take the activation arena's free bytes, phase by phase)

    .venv/bin/python benchmarks/out_of_core.py --models vgg16_224
        (opt-in, SwapNN's own VGG-16 at 224x224: 138 M parameters, 15.5 G
        MACs, 27.7 G instructions under QEMU: about 9 to 12 minutes here, reported
        like vgg16_64)
    .venv/bin/python benchmarks/out_of_core.py --models vgg16_224 --program-only
        (built up to its program only, no QEMU run: the program's estimate
        with the cost model's compute, its ratio to unlimited SRAM and the
        lower bound; when the build stops, why, and the scheduler on the
        synthetic chain of the same network, tessera.storage.chain)

--what-if-read-bandwidth re-runs the scheduler on each build's own problem
(its tiles, transfers and measured compute) with the card read at that many
bytes per second, leaving the target YAML's figures as they are: how far
the card's assumed speed, not the schedule, sets the latency.

Compute times are QEMU instruction counts taken as cycles at the target's
clock (an assumption, said in the report); IO times come from the YAML's
card figures (assumptions too). vgg16_64 takes minutes (44 M parameters,
2.5 G instructions under QEMU).
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))


def _target_file(target):
    """--target: a bundled target's name or a target YAML's path."""
    return target if target.endswith(".yaml") else os.path.join(ROOT, "targets", target + ".yaml")


def _name(target):
    """A build's folder name under out/ (a target's or a model's): its YAML's name."""
    return os.path.splitext(os.path.basename(target))[0]


def build(out, target, model):
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", f"out={out}", f"target={target}", f"model={model}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    path = os.path.join(out, _name(target), _name(model), "report.json")
    if res.returncode != 0 or not os.path.isfile(path):
        return None, (res.stderr.strip().splitlines() or ["failed"])[-1]
    with open(path) as f:
        return json.load(f), None


# models --program-only may build up to the program only (their size for the
# synthetic chain when the build stops before it)
ESTIMATE_ONLY = {"vgg16_224": 224}


def program_only(out, target, model):
    """Build `model` up to program.json and print the program's estimate
    (the cost model's compute: no run), or why the build stopped and the
    scheduler's estimate on the same network as a synthetic chain."""
    from tessera.storage import estimate as estimator
    from tessera.storage import tasks as tg

    path = os.path.join(out, _name(target), _name(model), "program.json")
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", f"out={out}", f"target={target}", f"model={model}", path]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0 or not os.path.isfile(path):
        err = next((line for line in res.stdout.splitlines() + res.stderr.splitlines()
                    if line.startswith("tessera: error")), (res.stderr.strip().splitlines() or ["failed"])[-1])
        print(f"{model} on {target}: the build stops before its program: {err}")
        chain_estimate(target, ESTIMATE_ONLY[model])
        return
    with open(path) as f:
        prog = json.load(f)
    if not prog.get("program"):
        print(f"{model} on {target}: the firmware would run in order: {prog['why']}")
        return
    # the pools the firmware has (with phases: the largest phase's), as the report's bound
    p = dict(prog["problem"], pools=prog["pools"])
    unlimited = sum(t["compute_ns"] for layer in p["layers"] for t in layer["tiles"])
    tasks = tg.build(p, 1)
    bound = estimator.lower_bound(p, tasks)
    # in order as the report counts it: every transfer once, then the compute
    in_order = unlimited + sum(t["ns"] for t in tasks if t["kind"] != "compute")
    print(f"{model} on {target} (program only, {prog['compute']}): {prog['candidate']} "
          f"{prog['estimate_ns'] / 1e6:.0f} ms per frame = {prog['estimate_ns'] / unlimited:.3f}x unlimited SRAM "
          f"({unlimited / 1e6:.0f} ms); lower bound {bound / unlimited:.3f}x; in order "
          f"{in_order / unlimited:.3f}x; card {prog['totals']}")


def chain_estimate(target, size, sram_kb=512):
    """The scheduler on VGG-16 at size x size as a synthetic chain
    (tools/ooc_schedule.py: SwapNN's pools, 1/4 in, 1/2 weights, 1/4 out,
    of sram_kb; the cost model's compute) with the target's card."""
    import yaml

    from tessera.storage import chain, costs
    from tessera.storage import estimate as estimator
    with open(_target_file(target)) as f:
        tcfg = yaml.safe_load(f)
    card = next(lvl for lvl in tcfg["memory"].values() if lvl.get("kind") == "storage")
    with open(os.path.join(ROOT, "kernels", "cmsis_nn", "cost", "stm32h7.yaml")) as f:
        coefs = yaml.safe_load(f)
    sram = sram_kb * 1024
    layers, shape = chain.vgg16(size)
    problem = chain.build_problem(layers, {"in": sram // 4, "w": sram // 2, "out": sram // 4},
                                  costs.storage_params(card), tcfg["clock_hz"], coefs, input_shape=shape)
    s = estimator.estimate(problem, frames=1)["summary"]
    print(f"  the synthetic chain (tessera.storage.chain, {sram_kb} kB of pools, the card of {target}): "
          f"{s['latency_ns'] / 1e6:.0f} ms per frame = {s['latency_ns'] / s['unlimited_ns']:.3f}x unlimited SRAM "
          f"({s['unlimited_ns'] / 1e6:.0f} ms); lower bound {s['lower_bound_ns'] / s['unlimited_ns']:.3f}x")


def _finished(out, target, model):
    """A finished build's graph, plan, tilings, verdict and the target's
    storage level (tessera.storage.ooc's `storage`)."""
    import yaml

    from tessera.util import canon
    from tessera.ir import Graph

    d = os.path.join(out, _name(target), _name(model))
    graph = Graph.from_json(canon.read_json(os.path.join(d, "graph.json")))
    the_plan = canon.read_json(os.path.join(d, "memplan.json"))
    tilings = {layer.name: canon.read_json(os.path.join(d, "tiling", layer.name + ".json")) for layer in graph.layers}
    verdict = canon.read_json(os.path.join(d, "verdict.json"))
    with open(_target_file(target)) as f:
        tcfg = yaml.safe_load(f)
    name = next(n for n, lvl in tcfg["memory"].items() if lvl.get("kind") == "storage")
    lvl = tcfg["memory"][name]
    storage = dict({k: lvl[k] for k in ("size", "read_bandwidth", "write_bandwidth", "latency_us", "block",
                                        "endurance")}, level=name, clock_hz=tcfg["clock_hz"])
    return graph, the_plan, tilings, verdict, storage


def what_if(out, target, model, read_bandwidth):
    """The scheduler's estimate of a finished build with another card read
    bandwidth: (estimate dict, or None and why)."""
    from tessera.storage import ooc

    graph, the_plan, tilings, verdict, storage = _finished(out, target, model)
    storage["read_bandwidth"] = read_bandwidth
    io = ooc.layer_io(graph, the_plan, tilings, storage)
    return ooc.estimate(graph, io, [int(c) for c in verdict["counts"]], storage)


def lower_bound(out, target, model, fw):
    """The card's lower bound for the run the firmware made, in ms, or None
    and why: no program with the run's tiles and pools, the compute as
    measured, is faster (docs/out_of_core_schedule.md, "The lower bound").
    The scheduler's program: its problem (program.json); the in-order
    firmware: its transfers with the pools tessera.storage.ooc gives them."""
    from tessera.storage import firmware, ooc

    graph, the_plan, tilings, verdict, storage = _finished(out, target, model)
    compute = [int(c) for c in verdict["counts"]]
    if fw and fw["program"] != "in order":
        with open(os.path.join(out, _name(target), _name(model), "program.json")) as f:
            return firmware.lower_bound_ns(json.load(f), compute, storage["clock_hz"]) / 1e6, None
    ns, why = ooc.lower_bound_ns(graph, ooc.layer_io(graph, the_plan, tilings, storage), compute, storage)
    return (None, why) if ns is None else (ns / 1e6, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="stm32f746_sd")
    ap.add_argument("--models", nargs="+", default=["vgg16_64", "mbv1_128", "alexnet_64"])
    ap.add_argument("--out", default=os.path.join(ROOT, "generated"))
    ap.add_argument("--what-if-read-bandwidth", type=float, metavar="B_PER_S",
                    help="also estimate each schedule with the card read at this bandwidth (the YAML unchanged)")
    ap.add_argument("--program-only", action="store_true",
                    help=f"build {', '.join(ESTIMATE_ONLY)} up to the program only (no QEMU run)")
    args = ap.parse_args()
    for model in args.models:
        if model in ESTIMATE_ONLY and args.program_only:
            program_only(os.path.abspath(args.out), args.target, model)
            continue
        rep, err = build(os.path.abspath(args.out), args.target, model)
        if rep is None:
            print(f"{model}: build failed: {err}")
            continue
        o, tot = rep["out_of_core"], rep["totals"]
        t = o["totals"]
        print(f"{model} on {args.target}: {rep['verdict'].upper()} (bit-exact layers: "
              f"{sum(l['match'] for l in rep['layers'])}/{len(rep['layers'])}), {tot['params']} parameters, "
              f"{tot['macs']} MACs")
        print(f"  card: {t['read_bytes']} B read in {t['reads']} transfers, {t['written_bytes']} B written in "
              f"{t['writes']} ({t['blocks_written']} blocks; wear-out after {t['inferences_to_wear_out']} inferences)"
              f"; as the driver counted: {t.get('measured')}")
        bound = [l["name"] for l in o["layers"] if l.get("bound") == "io"]
        print(f"  IO-bound layers ({len(bound)}): {', '.join(bound) or 'none'}")
        print(f"  compute {t['compute_ms']} ms, IO {t['io_ms']} ms; in order {t['in_order_ms']} ms = "
              f"{t['in_order_ms'] / t['unlimited_ms']:.3f}x unlimited SRAM ({t['unlimited_ms']} ms)")
        s = o.get("schedule")
        if s and "skipped" in s:
            print(f"  scheduled: {s['skipped']}")
        elif s:
            print(f"  scheduled ({s['program']}): {s['latency_ms']} ms per frame = {s['latency_vs_unlimited']}x "
                  f"unlimited (lower bound {s['lower_bound_ms']} ms = "
                  f"{s['lower_bound_ms'] / s['unlimited_ms']:.3f}x); {s['frames']} frames pipelined: "
                  f"{s['pipelined_ms_per_frame']} ms per frame, {s['throughput_fps']} frames/s "
                  f"(unlimited {s['unlimited_fps']})")
        else:
            print("  scheduled: no scheduler in this checkout (tessera.storage.schedule)")
        fw = o.get("firmware")
        if fw and fw["program"] == "in order":
            print(f"  firmware runs: the in-order program ({fw['why']})")
        elif fw:
            where = (f"{len(fw['phases'])} phases in the arena's free bytes, the largest pools" if fw.get("phases")
                     else "dedicated pools")
            print(f"  firmware runs: the scheduler's program {fw['program']} ({fw['ops']['ops']} ops; {where} "
                  f"{fw['pools']}): {fw['estimate_ms']} ms per frame = {fw['estimate_vs_unlimited']}x unlimited; "
                  f"in order (every transfer, then the compute, nothing overlapped) {fw['in_order_ms']} ms; "
                  f"ops the firmware counted equal the program's: {fw['ops'] == fw.get('counted')}")
        # the bound of the run the firmware made, whatever program it runs
        bound, why = lower_bound(os.path.abspath(args.out), args.target, model, fw)
        ran = fw["estimate_ms"] if fw and fw["program"] != "in order" else t["in_order_ms"]
        if bound is None:
            print(f"  lower bound of this run: none ({why})")
        else:
            print(f"  lower bound of this run (docs/out_of_core_schedule.md): {bound:.3f} ms = "
                  f"{bound / t['unlimited_ms']:.3f}x unlimited; the run's {ran} ms is {ran / bound:.4f}x it")
        if args.what_if_read_bandwidth and s and "skipped" not in s:
            w = what_if(os.path.abspath(args.out), args.target, model, int(args.what_if_read_bandwidth))
            if w is None or "skipped" in w:
                print(f"  what if: {w and w['skipped']}")
            else:
                print(f"  what if the card read {args.what_if_read_bandwidth / 1e6:g} MB/s: {w['latency_ms']} ms "
                      f"per frame = {w['latency_vs_unlimited']}x unlimited (lower bound {w['lower_bound_ms']} ms = "
                      f"{w['lower_bound_ms'] / w['unlimited_ms']:.3f}x; in order {w['in_order_ms']} ms)")


if __name__ == "__main__":
    main()
