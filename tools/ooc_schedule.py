#!/usr/bin/env python3
"""Schedule a synthetic VGG-16 or AlexNet-like chain out of core and print
the estimates (tessera.storage; docs/out_of_core_schedule.md): latency per
frame against unlimited SRAM, the provable lower bound, the in-order
program, every candidate (SwapNN's own loop among them), throughput over pipelined frames, bytes written, and per layer
the normalized arithmetic intensity N and the bound.

    .venv/bin/python tools/ooc_schedule.py vgg16 --sram 320 [--size 64]
        [--read-mbps 10 --write-mbps 5 --latency-us 500 --block 512]
        [--clock-mhz 216] [--coefs kernels/cmsis_nn/cost/stm32h7.yaml | --cycles-per-mac 2]
        [--frames 10] [--svg out.svg]

Defaults: the stm32f746_sd target's card (10 MB/s reads, 5 MB/s writes,
0.5 ms a transfer) and the Cortex-M7 cost model of the cmsis_nn kernels
(QEMU instructions taken as cycles); SRAM split as SwapNN does (1/4 input
tiles, 1/2 weights, 1/4 output tiles).
"""

import argparse
import os
import sys
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))

from tessera.errors import TesseraError  # noqa: E402
from tessera.storage import chain, costs, estimate, timeline  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("net", choices=["vgg16", "alexnet"])
    ap.add_argument("--sram", type=int, default=320, help="kB of SRAM for the three tile pools")
    ap.add_argument("--size", type=int, default=None, help="input height and width (vgg16: 64, alexnet: 48)")
    ap.add_argument("--read-mbps", type=float, default=10.0)
    ap.add_argument("--write-mbps", type=float, default=5.0)
    ap.add_argument("--latency-us", type=float, default=500.0)
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--clock-mhz", type=float, default=216.0)
    ap.add_argument("--coefs", default=os.path.join(ROOT, "kernels", "cmsis_nn", "cost", "stm32h7.yaml"))
    ap.add_argument("--cycles-per-mac", type=float, default=None, help="instead of the cost model")
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--svg", default=None, help="write the one-frame timeline here")
    a = ap.parse_args(argv)
    layers, shape = chain.vgg16(a.size or 64) if a.net == "vgg16" else chain.alexnet_like(a.size or 48)
    sram = a.sram * 1024
    pools = {"in": sram // 4, "w": sram // 2, "out": sram // 4}
    storage = costs.storage_params({"read_bandwidth": a.read_mbps * 1e6, "write_bandwidth": a.write_mbps * 1e6,
                                    "latency_us": a.latency_us, "block": a.block})
    coefs = None if a.cycles_per_mac else yaml.safe_load(open(a.coefs))
    try:
        problem = chain.build_problem(layers, pools, storage, a.clock_mhz * 1e6, coefs, a.cycles_per_mac or 2.0,
                                      input_shape=shape)
        t0 = time.time()
        est = estimate.estimate(problem, frames=a.frames)
    except (chain.ChainError, TesseraError) as err:
        print(f"ooc_schedule.py: {err} (give more --sram)", file=sys.stderr)
        return 1
    s = est["summary"]
    ms = lambda ns: f"{ns / 1e6:.1f} ms"  # noqa: E731
    print(f"{a.net} at {shape[0]}x{shape[1]}, {a.sram} kB of pools {pools}, reads {a.read_mbps} MB/s, writes "
          f"{a.write_mbps} MB/s, {a.latency_us} us a transfer, compute: "
          f"{f'{a.cycles_per_mac} cycles/MAC' if a.cycles_per_mac else os.path.relpath(a.coefs, ROOT)} "
          f"at {a.clock_mhz} MHz")
    print(f"  tiles {sum(len(layer['tiles']) for layer in problem['layers'])}, scheduled in {time.time() - t0:.0f} s")
    print(f"  latency {ms(s['latency_ns'])} ({s['candidate']}), unlimited SRAM {ms(s['unlimited_ns'])}: "
          f"{s['ratio_x1000'] / 1000:.3f}x; lower bound {ms(s['lower_bound_ns'])} "
          f"({s['lower_bound_ns'] / s['unlimited_ns']:.3f}x); in order {ms(s['in_order_ns'])}")
    print("  candidates: " + ", ".join(f"{k} {'-' if v is None else ms(v)}"
                                       for k, v in est["one"]["candidates"].items()))
    print(f"  {s['frames']} frames pipelined: {ms(s['pipelined_ns'] / s['frames'])} per frame, "
          f"{s['throughput_fps_x1000'] / 1000:.3f} frames/s (unlimited {s['unlimited_fps_x1000'] / 1000:.3f})")
    print(f"  read {s['read_bytes']} B, written {s['written_bytes']} B per inference; "
          f"IO-bound layers: {', '.join(s['io_bound_layers'])}")
    for r in s["layers"]:
        n = f"{r['intensity_x1000'] / 1000:.3f}" if r["intensity_x1000"] is not None else "-"
        print(f"    {r['name']:14} compute {ms(r['compute_ns']):>11}  io {ms(r['io_ns']):>11}  N {n:>7}  {r['bound']}")
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(timeline.svg(problem, est["one"]["replay"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
