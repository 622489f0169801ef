#!/usr/bin/env python3
"""Build-time benchmark (not a test): how long tessera's build graph takes
for mbv1_128 on the host, cold and as a no-op rebuild, measured in the same
run so the ratio means something on a shared, noisy machine.

    .venv/bin/python benchmarks/build_time.py [--target host] [--model mbv1_128] [--repeat 3]

Cold = tiling (one CP-SAT solve per layer), memory plan and code generation
of every layer from an empty output directory, with the model's IR and
golden outputs already prepared (that part runs when SConstruct is read and
is timed separately). Only the generated sources are built (the goal is the
network's src/ folder); --all times the whole build (compile, run, check).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def scons(out, target, model, *extra):
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", f"out={out}", f"target={target}",
           f"model={model}", *extra]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"build failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="host")
    ap.add_argument("--model", default="mbv1_128")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--all", action="store_true", help="time the whole build (compile, run, check)")
    args = ap.parse_args()
    cold, noop, prep = [], [], []
    for _ in range(args.repeat):
        out = tempfile.mkdtemp(prefix="tessera-bench-")
        try:
            netdir = os.path.join(out, args.target, args.model)
            goals = [] if args.all else [os.path.join(netdir, "src")]
            # prepare only (model, IR, golden): `-n` reads the SConstruct, builds nothing
            prep.append(scons(out, args.target, args.model, "-n"))
            cold.append(scons(out, args.target, args.model, *goals))
            noop.append(scons(out, args.target, args.model, *goals))
        finally:
            shutil.rmtree(out, ignore_errors=True)
    what = "whole build" if args.all else "tiling + memory plan + code generation"
    best = lambda xs: min(xs)  # noqa: E731  (least disturbed by other load)
    print(f"{args.model} on {args.target}, best of {args.repeat}:")
    rows = [("model preparation (ONNX -> IR -> golden, at read time)", best(prep)),
            (f"cold {what}", best(cold)), ("no-op rebuild (SCons says up to date)", best(noop))]
    for label, secs in rows:
        print(f"  {label:56s} {secs:7.2f} s")
    print(f"  cold / no-op ratio: {best(cold) / best(noop):.1f}x")


if __name__ == "__main__":
    main()
