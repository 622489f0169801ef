#!/usr/bin/env python3
"""MLPerf Tiny on Cortex-M (not a test): issue 33's table from tessera's
side in one run. Each reference model (examples/mlperf_tiny/, the
published int8 .tflite files) is built and run under QEMU on each target
twice, with the default settings and with `fusion=none`, every layer
checked bit-exact; the table gives tessera's layer instructions (QEMU,
-icount shift=0, the CMSDK timer around each layer) against TFLite Micro's
`Invoke()` with CMSIS-NN measured the same way (the baseline below), and
tessera's total RAM (what the firmware declares) against TFLM's arena plus
its static RAM and stack.

    .venv/bin/python benchmarks/mlperf_tiny.py [--targets stm32h7 stm32f4]
        [--models kws vww ic_resnet8 ad01] [--data DIR] [--out DIR] [--no-none]
        [--base REF]

--base REF also builds and runs each model with the default settings of
another commit (a git ref, extracted with `git archive`, or the path of a
checkout) in the same invocation, beside this tree's: `--base 923390f`
measures the "before" of issue 33 (its table's tessera column) again.

Then per model and kind of layer, tessera's instructions per MAC with
`fusion=none` and, for the default build, its fused steps as kinds of
their own (a fused step's count is its whole step: it is never mixed into
a layer kind).

TFLM's figures are issue 33's measurement (tensorflow/tflite-micro
90b983c2b, OPTIMIZED_KERNEL_DIR=cmsis_nn and the CMSIS-NN it pins, Debian
GCC 12.2.1, picolibc, -O2, the same boards and counter); static RAM and
stack were measured for KWS only, and the RAM budget of the other models
assumes the same (the interpreter's static data and its stack do not
depend much on the model).
"""

import argparse
import json
import os
import sys
import tempfile

from compare import checkout
from cortexm_kernels import build, kinds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = {"kws": "kws_ref_model.tflite", "vww": "vww_96_int8.tflite",
         "ic_resnet8": "pretrainedResnet_quant.tflite", "ad01": "ad01_int8.tflite"}
DATA_DIRS = [os.path.join(ROOT, "examples", "mlperf_tiny", "data"),
             os.path.join(os.path.dirname(ROOT), "shared", "mlperf_tiny")]
CPU = {"stm32h7": "M7", "stm32f4": "M4"}

# TFLM + CMSIS-NN Invoke() instructions per model and target (issue 33)
TFLM = {("kws", "stm32h7"): 7_613_960, ("kws", "stm32f4"): 7_668_120,
        ("vww", "stm32h7"): 24_004_320, ("vww", "stm32f4"): 24_080_680,
        ("ic_resnet8", "stm32h7"): 31_357_240, ("ic_resnet8", "stm32f4"): 31_199_760,
        ("ad01", "stm32h7"): 583_720, ("ad01", "stm32f4"): 583_440}
# TFLM's arena per model; its static RAM and stack (measured on KWS)
TFLM_ARENA = {"kws": 22_820, "vww": 100_708, "ic_resnet8": 54_996, "ad01": 2_580}
TFLM_STATIC, TFLM_STACK = 4_528, 1_340


def data_dir(given):
    for folder in [given] if given else DATA_DIRS:
        if folder and all(os.path.exists(os.path.join(folder, f)) for f in FILES.values()):
            return folder
    sys.exit(f"mlperf_tiny: the MLPerf Tiny .tflite files are in none of {[given] if given else DATA_DIRS} "
             "(tools/mlperf_tiny.py copies them from a mlcommons/tiny clone)")


def model_yaml(tmp, name, data):
    """examples/mlperf_tiny/<name>.yaml pointed at the data folder."""
    with open(os.path.join(ROOT, "examples", "mlperf_tiny", f"{name}.yaml")) as f:
        text = f.read().replace(f"tflite: data/{FILES[name]}", f"tflite: {os.path.join(data, FILES[name])}")
    path = os.path.join(tmp, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def ram_total(rep):
    return sum(m.get("ram", 0) for m in rep["memory"].values())


def tflm_rounding(build_dir):
    """AD01's output (the golden model's, equal to the TFLite interpreter's
    and the firmware's) against the same network with every
    FULLY_CONNECTED requantized as TFLM's CMSIS-NN kernel does
    (arm_nn_requantize in CMSIS-NN's default build: TFLite's two roundings,
    SaturatingRoundingDoublingHighMul then RoundingDivideByPOT, where the
    interpreter's reference kernel rounds once): (bytes that differ, the
    largest difference, the output's size)."""
    sys.path.insert(0, os.path.join(ROOT, "site_scons"))
    import copy

    import numpy as np

    from tessera import golden
    from tessera.ir import Graph

    with open(os.path.join(build_dir, "graph.json")) as f:
        graph = Graph.from_json(json.load(f))
    weights = dict(np.load(os.path.join(build_dir, "weights.npz")))
    inputs = dict(np.load(os.path.join(build_dir, "input.npz")))
    twice = copy.deepcopy(graph)
    for layer in twice.layers:
        if layer.op == "linear" and layer.requant.rounding == "half_up":
            layer.requant.rounding = "tflite"
    out = graph.outputs[0]
    a = np.asarray(golden.run(graph, weights, inputs)[out]).astype(np.int32).reshape(-1)
    b = np.asarray(golden.run(twice, weights, inputs)[out]).astype(np.int32).reshape(-1)
    return int((a != b).sum()), int(np.abs(a - b).max(initial=0)), a.size


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=["stm32h7", "stm32f4"], choices=sorted(CPU))
    ap.add_argument("--models", nargs="+", default=list(FILES), choices=list(FILES))
    ap.add_argument("--data", help="folder with the four .tflite files")
    ap.add_argument("--out", help="build folder (default: a temporary one)")
    ap.add_argument("--no-none", action="store_true", help="skip the fusion=none builds")
    ap.add_argument("--base", metavar="REF", help="also the default builds of this git ref (or checkout)")
    args = ap.parse_args()
    data = data_dir(args.data)

    runs = {}
    with tempfile.TemporaryDirectory(prefix="tessera-mlperf-") as tmp:
        out = args.out or os.path.join(tmp, "out")
        base_tree = checkout(args.base, tmp) if args.base else None
        for name in args.models:
            yml = model_yaml(tmp, name, data)
            for target in args.targets:
                runs[name, target, "default"] = build(out, target, yml)
                if not args.no_none:
                    runs[name, target, "none"] = build(out, target, yml, "fusion=none")
                if base_tree:
                    runs[name, target, "base"] = build(os.path.join(out, "base"), target, yml, tree=base_tree)
        # the golden model's graph, weights and input are the same on every target
        ad01 = tflm_rounding(os.path.join(out, args.targets[0], "ad01")) if "ad01" in args.models else None

    print("MLPerf Tiny under QEMU: tessera's layer instructions (default settings) against TFLite Micro + "
          "CMSIS-NN Invoke() (issue 33's measurement), every build bit-exact\n")
    head = (f"{'model':<11} {'CPU':<4} {'tessera':>11} {'TFLM':>11} {'ratio':>6} {'fusion=none':>12} {'ratio':>6}"
            f" {'RAM':>8} {'TFLM RAM':>9} {'ratio':>6} {'estimate':>9}")
    print(head)
    print("-" * len(head))
    for name in args.models:
        for target in args.targets:
            rep = runs[name, target, "default"]
            n = rep["totals"]["instructions"]
            base = TFLM[name, target]
            none = runs.get((name, target, "none"))
            nn = none["totals"]["instructions"] if none else None
            ram, budget = ram_total(rep), TFLM_ARENA[name] + TFLM_STATIC + TFLM_STACK
            err = rep["totals"].get("cost", {}).get("error")
            print(f"{name:<11} {CPU[target]:<4} {n:>11,} {base:>11,} {n / base:>6.3f} "
                  + (f"{nn:>12,} {nn / base:>6.3f}" if nn else f"{'':>12} {'':>6}")
                  + f" {ram:>8,} {budget:>9,} {ram / budget:>6.3f}"
                  + (f" {100 * err:>+8.1f}%" if err is not None else ""))
    print("\nestimate: the cost model's count of the default build against its measured layers")
    print(f"TFLM RAM: its arena (kws {TFLM_ARENA['kws']:,}, vww {TFLM_ARENA['vww']:,}, ic_resnet8 "
          f"{TFLM_ARENA['ic_resnet8']:,}, ad01 {TFLM_ARENA['ad01']:,}) + static {TFLM_STATIC:,} + stack "
          f"{TFLM_STACK:,}; tessera's: the report's total (activations, tile arena or in-place scratch, the "
          "target's reserved data and stack)")

    if args.base:
        print(f"\n--base {args.base}: its default builds, and this tree's against them\n")
        head = f"{'model':<11} {'CPU':<4} {'base':>11} {'ratio':>6} {'TFLM':>6} {'base RAM':>9} {'ratio':>6}"
        print(head)
        print("-" * len(head))
        for name in args.models:
            for target in args.targets:
                b, rep = runs[name, target, "base"], runs[name, target, "default"]
                n = b["totals"]["instructions"]
                print(f"{name:<11} {CPU[target]:<4} {n:>11,} {rep['totals']['instructions'] / n:>6.3f} "
                      f"{n / TFLM[name, target]:>6.2f} {ram_total(b):>9,} {ram_total(rep) / ram_total(b):>6.3f}")
        print("ratio: this tree's / the base's; TFLM: the base's / TFLM's")

    if ad01:
        n, most, size = ad01
        print(f"\nAD01 with TFLM's FULLY_CONNECTED rounding (CMSIS-NN's two roundings where the TFLite reference "
              f"interpreter rounds once): {n} of {size} output bytes differ, by at most {most}")

    print("\nPer kind: instructions per MAC (fused steps on their own rows)\n")
    for name in args.models:
        for target in args.targets:
            for variant in ("none", "default"):
                rep = runs.get((name, target, variant))
                if rep is None:
                    continue
                rows = kinds(rep)
                cells = ", ".join(f"{k} {v[1] / max(1, v[0]):.2f} ({v[1]:,})"
                                  for k, v in sorted(rows.items(), key=lambda kv: -kv[1][1]))
                print(f"{name} {CPU[target]} {variant}: {cells}")


if __name__ == "__main__":
    main()
