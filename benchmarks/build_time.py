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

L1 change = the rebuild after the target's tile level (L1) shrinks to 3/4
of its size (the "change the L1 size, build again" loop): the target YAML
is a copy in the temporary output folder, under the same name, so the
other rows build exactly what `target=<name>` builds.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

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


def target_copy(target, folder, shrink=1.0):
    """Write <folder>/<name>.yaml: the bundled target with its tile level's
    size times `shrink`. Returns its path."""
    path = target if target.endswith(".yaml") else os.path.join(ROOT, "targets", target + ".yaml")
    with open(path) as f:
        data = yaml.safe_load(f)
    level = data["memory"][data["place"]["tiles"]]
    level["size"] = int(level["size"] * shrink)
    copy = os.path.join(folder, os.path.basename(path))
    with open(copy, "w") as f:
        yaml.safe_dump(data, f, sort_keys=False)
    return copy


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="host")
    ap.add_argument("--model", default="mbv1_128")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--all", action="store_true", help="time the whole build (compile, run, check)")
    args = ap.parse_args()
    cold, noop, prep, l1 = [], [], [], []
    for _ in range(args.repeat):
        out = tempfile.mkdtemp(prefix="tessera-bench-")
        try:
            tdir = os.path.join(out, "targets")
            os.makedirs(tdir)
            target = target_copy(args.target, tdir)
            netdir = os.path.join(out, os.path.basename(target)[:-len(".yaml")], args.model)
            goals = [] if args.all else [os.path.join(netdir, "src")]
            # prepare only (model, IR, golden): `-n` reads the SConstruct, builds nothing
            prep.append(scons(out, target, args.model, "-n"))
            cold.append(scons(out, target, args.model, *goals))
            noop.append(scons(out, target, args.model, *goals))
            target_copy(args.target, tdir, 0.75)
            l1.append(scons(out, target, args.model, *goals))
        finally:
            shutil.rmtree(out, ignore_errors=True)
    what = "whole build" if args.all else "tiling + memory plan + code generation"
    best = lambda xs: min(xs)  # noqa: E731  (least disturbed by other load)
    print(f"{args.model} on {args.target}, best of {args.repeat}:")
    rows = [("model preparation (ONNX -> IR -> golden, at read time)", best(prep)),
            (f"cold {what}", best(cold)), ("no-op rebuild (SCons says up to date)", best(noop)),
            ("L1 size change (tile level at 3/4), rebuild", best(l1))]
    for label, secs in rows:
        print(f"  {label:56s} {secs:7.2f} s")
    print(f"  cold / no-op ratio: {best(cold) / best(noop):.1f}x")


if __name__ == "__main__":
    main()
