#!/usr/bin/env python3
"""Build-time benchmark (not a test): how long tessera's build graph takes,
cold, as a no-op, after an L1-size change and after a one-layer change, and
how the cold build grows with the number of layers. With --before it times
another checkout (e.g. main before a change) in the same run, alternating
the two, so the comparison means something on a shared, noisy machine.

    .venv/bin/python benchmarks/build_time.py [--target host] [--model mbv1_128] [--repeat 3]
        [--layers 10,30,100,300] [--before <checkout>] [--all]

    git worktree add /tmp/before main     # or: git archive main | tar -x -C /tmp/before
    .venv/bin/python benchmarks/build_time.py --before /tmp/before

Every figure is the median of --repeat runs (each from a fresh output
folder; the generated ONNX files are shared through one model cache), as
wall-clock seconds and as CPU seconds (user + system: what a busy machine
does not inflate, since a build runs one thread).

Cold = tiling (one CP-SAT solve per distinct layer view), memory plan and
code generation of every layer from an empty output directory, with the
model's IR and golden outputs already prepared (that part runs when
SConstruct is read and is timed separately as "model preparation"). Only
the generated sources are built (the goal is the network's src/ folder);
--all times the whole build (compile, run, check).

L1 change = the rebuild after the target's tile level (L1) shrinks to 3/4
of its size (the "change the L1 size, build again" loop): the target YAML
is a copy in the temporary output folder, under the same name, so the
other rows build exactly what `target=<name>` builds.

One-layer change = the rebuild after one layer's int8 weights change (a
middle pointwise layer's weights negated in a copy of the quantized ONNX
file, its scales untouched): the model is imported and its golden model
and ONNX Runtime check rerun when SConstruct is read (included), then only
what that layer's weights feed is generated again.

Scaling = the cold build of generated chains of N layers (a 3x3 conv, then
depthwise 3x3 / pointwise 1x1 pairs on 32x32 activations with seeded random
channel counts between 8 and 64, an average pool and a classifier,
quantized with ONNX Runtime like the zoo's models), printed per layer.
"""

import argparse
import glob
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))


class Seconds(float):
    """Wall-clock seconds of a build, with its CPU seconds (user + system)
    as .cpu: on a machine shared with other work the wall clock also counts
    the waits for a core, the CPU time does not (a build is one thread:
    SCons without -j, CP-SAT with one worker)."""

    def __new__(cls, wall, cpu):
        obj = super().__new__(cls, wall)
        obj.cpu = cpu
        return obj


def scons(root, out, target, model, *extra, env=None):
    cmd = [sys.executable, "-m", "SCons", "-C", root, "-Q", f"out={out}", f"target={target}",
           f"model={model}", *extra]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        sys.exit(f"build failed ({root}: {' '.join(cmd[3:])}):\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return Seconds(dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))


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


def model_copy(model, onnx_path, folder):
    """<folder>/<name>.yaml naming a copy of the model's quantized ONNX file
    (the same network, given as a file, so that the file can be edited)."""
    with open(os.path.join(ROOT, "models", model + ".yaml")) as f:
        data = yaml.safe_load(f)
    shutil.copyfile(onnx_path, os.path.join(folder, model + ".onnx"))
    data = {"description": data.get("description", model), "onnx": model + ".onnx",
            "input": data.get("input", {"seed": 0})}
    path = os.path.join(folder, model + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(data, f, sort_keys=False)
    return path


def change_one_layer(onnx_path):
    """Negate the int8 weights of the middle pointwise (else any) conv layer
    of a quantized ONNX file in place; returns the layer's name."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    m = onnx.load(onnx_path)
    names = [i.name for i in m.graph.initializer if i.name.endswith(".weight_quantized")]
    pointwise = [n for n in names if n.startswith("pw")] or names
    name = pointwise[len(pointwise) // 2]
    for i, init in enumerate(m.graph.initializer):
        if init.name == name:
            w = numpy_helper.to_array(init)
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array((-w.astype(np.int16)).astype(w.dtype), name))
    onnx.save(m, onnx_path)
    return name[:-len(".weight_quantized")]


def chain_model(n, folder):
    """A quantized chain of n layers (see the module docstring) and its
    model YAML in <folder>; returns the YAML's path."""
    import numpy as np

    from tessera.zoo.net import Net
    from tessera.zoo.params import quantization_params
    from tessera.zoo.quantize import normalize, quantize

    rng = np.random.default_rng(n)
    net = Net(rng, 3, 32, 32)
    x = net.conv("input", "conv0", 16, 3, act="relu6")
    for i in range(1, n - 2):
        if i % 2:
            x = net.conv(x, f"dw{i}", net.channels(x), 3, group=net.channels(x), act="relu6")
        else:
            x = net.conv(x, f"pw{i}", int(rng.integers(8, 65)), 1, act="relu6")
    x = net.global_avgpool(x, "pool")
    x = net.flatten(x, "flatten")
    net.classifier(x, "fc", 10)
    name = f"chain{n}"
    model = quantize(net.model(name), quantization_params({"calibration_samples": 4, "seed": 0}))
    normalize(model, {})
    with open(os.path.join(folder, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())
    path = os.path.join(folder, name + ".yaml")
    with open(path, "w") as f:
        # a random chain's requantization is not what the check is about
        yaml.safe_dump({"description": f"benchmark chain of {n} layers", "onnx": name + ".onnx",
                        "input": {"seed": 0}, "ort_check": "warn"}, f, sort_keys=False)
    return path


def measure(root, args, env, goal_of):
    """One repeat of the mbv1 rows for checkout `root`: {row: seconds}."""
    out = tempfile.mkdtemp(prefix="tessera-bench-")
    try:
        tdir = os.path.join(out, "targets")
        os.makedirs(tdir)
        target = target_copy(args.target, tdir)
        netdir = os.path.join(out, os.path.basename(target)[:-len(".yaml")], args.model)
        goals = goal_of(netdir)
        row = {}
        # prepare only (model, IR, golden): `-n` reads the SConstruct, builds nothing
        row["prep"] = scons(root, out, target, args.model, "-n", env=env)
        row["cold"] = scons(root, out, target, args.model, *goals, env=env)
        row["noop"] = scons(root, out, target, args.model, *goals, env=env)
        target_copy(args.target, tdir, 0.75)
        row["l1"] = scons(root, out, target, args.model, *goals, env=env)
        # one-layer change: the same network as a file, built, then one layer edited
        mdir = os.path.join(out, "models")
        os.makedirs(mdir)
        onnx_path = sorted(glob.glob(os.path.join(env["TESSERA_MODEL_CACHE"], args.model + "-*.onnx")))[0]
        model = model_copy(args.model, onnx_path, mdir)
        scons(root, out, target, model, *goals, env=env)
        change_one_layer(os.path.join(mdir, args.model + ".onnx"))
        row["one"] = scons(root, out, target, model, *goals, env=env)
        return row
    finally:
        shutil.rmtree(out, ignore_errors=True)


def prepared(root, args, env, model, folder):
    """An output folder with `model` prepared by checkout `root` (import,
    golden model, checks): copied for each cold build, so that the chains'
    long preparation runs once. Returns (folder, seconds it took)."""
    t = scons(root, folder, args.target, model, "-n", env=env)
    return folder, t


def measure_chain(root, args, env, template, model, n, goal_of):
    """The cold build of chain n in a copy of its prepared folder."""
    out = tempfile.mkdtemp(prefix="tessera-bench-")
    try:
        shutil.copytree(template, out, dirs_exist_ok=True)
        for sig in glob.glob(os.path.join(out, "**", ".sconsign*"), recursive=True):
            os.remove(sig)
        netdir = os.path.join(out, os.path.basename(args.target).replace(".yaml", ""), f"chain{n}")
        return scons(root, out, args.target, model, *goal_of(netdir), env=env)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="host")
    ap.add_argument("--model", default="mbv1_128")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--layers", default="10,30,100,300", help="chain lengths of the scaling table ('' skips it)")
    ap.add_argument("--before", help="another tessera checkout to time in the same run (e.g. a worktree of main)")
    ap.add_argument("--all", action="store_true", help="time the whole build (compile, run, check)")
    args = ap.parse_args()
    roots = [("after", ROOT)] + ([("before", os.path.abspath(args.before))] if args.before else [])
    goal_of = (lambda netdir: []) if args.all else (lambda netdir: [os.path.join(netdir, "src")])
    work = tempfile.mkdtemp(prefix="tessera-bench-models-")
    env = dict(os.environ, TESSERA_MODEL_CACHE=os.path.join(work, "cache"))
    try:
        rows = {name: [] for name, _ in roots}
        for _ in range(args.repeat):
            for name, root in roots:
                rows[name].append(measure(root, args, env, goal_of))
        med = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in rows.items()}
        cpu = {name: {k: statistics.median(r[k].cpu for r in runs) for k in runs[0]} for name, runs in rows.items()}
        what = "whole build" if args.all else "tiling + memory plan + code generation"
        print(f"{args.model} on {args.target}, median of {args.repeat} (seconds)"
              + (f"; before = {args.before}" if args.before else ""))
        labels = [("prep", "model preparation (ONNX -> IR -> golden, at read time)"),
                  ("cold", f"cold {what}"), ("noop", "no-op rebuild (SCons says up to date)"),
                  ("l1", "L1 size change (tile level at 3/4), rebuild"),
                  ("one", "one layer's weights changed, rebuild (incl. preparation)")]
        head = "  " + " " * 58 + "".join(f"{name:>9s} {'(CPU)':>7s}" for name, _ in roots)
        print(head)
        for key, label in labels:
            print(f"  {label:58s}" + "".join(f"{med[name][key]:9.2f} {cpu[name][key]:7.2f}" for name, _ in roots),
                  flush=True)
        print(f"  (wall-clock seconds, then CPU seconds; load average {os.getloadavg()[0]:.1f} "
              f"on {os.cpu_count()} cores at the end)")
        sizes = [int(s) for s in args.layers.split(",") if s.strip()]
        if sizes:
            chains = {n: chain_model(n, work) for n in sizes}
            print(f"\ncold {what} of a generated chain, median of {args.repeat}:")
            print("  layers" + "".join(f"  {name + ' s':>10s} {'ms/layer':>9s} {'CPU s':>7s} {'ms/layer':>9s}"
                                       for name, _ in roots)
                  + f"  {'prep s':>8s}  (prep: the chain's preparation at read time, once)")
            for n in sizes:
                times = {name: [] for name, _ in roots}
                templates = {name: prepared(root, args, env, chains[n], os.path.join(work, f"{name}-{n}"))
                             for name, root in roots}
                for _ in range(args.repeat):
                    for name, root in roots:
                        times[name].append(measure_chain(root, args, env, templates[name][0], chains[n], n,
                                                                   goal_of))
                cells = ""
                for name, _ in roots:
                    t = statistics.median(times[name])
                    c = statistics.median(x.cpu for x in times[name])
                    cells += f"  {t:10.2f} {1000 * t / n:9.1f} {c:7.2f} {1000 * c / n:9.1f}"
                print(f"  {n:6d}{cells}  {templates['after'][1]:8.2f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
