#!/usr/bin/env python3
"""Activation memory benchmark (not a test): per model and target, the
planned activation peak with segment-level overlap against the lower bound
with those overlaps and the tensor-level bound (whole tensors live at once),
and ST's published figure where there is one.

    .venv/bin/python benchmarks/memory.py [--targets stm32h7 gap8] [--models mbv1_128 mbv2_128 dscnn_kws]

Only the memory plan is built (tiling and planning, no compile or run); the
plan's hazard replay runs as part of it, so every printed plan is proven safe.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# STM32Cube.AI 8.1.0 on STM32H7, MobileNetV2-0.35-128 (the figures):
# activations and total RAM (activations plus 32.83 KiB runtime)
ST = {"mbv2_035_128": {"activations": 230574, "total": 258 * 1024}}


def plan(out, target, model, overlap):
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", f"out={out}", f"target={target}", f"model={model}",
           f"overlap={overlap}", os.path.join(out, target, model, "memplan.json")]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return None, (res.stderr.strip().splitlines() or ["failed"])[-1]
    with open(os.path.join(out, target, model, "memplan.json")) as f:
        return json.load(f)["activations"], None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=["stm32h7", "gap8"])
    ap.add_argument("--models", nargs="+", default=["mbv1_128", "mbv2_128", "dscnn_kws"])
    args = ap.parse_args()
    print(f"{'target':10} {'model':14} {'peak':>8} {'bound':>8} {'tensor':>8} {'peak/tensor':>11} "
          f"{'moved':>6} {'ST acts':>8}")
    with tempfile.TemporaryDirectory() as out:
        for target in args.targets:
            for model in args.models:
                acts, err = plan(out, target, model, 1)
                if acts is None:
                    print(f"{target:10} {model:14} {err}")
                    continue
                moved = len(acts.get("spill", {}).get("offsets", {}))
                st = ST.get(model, {}).get("activations", "")
                print(f"{target:10} {model:14} {acts['peak']:8} {acts['overlap_bound']:8} {acts['lower_bound']:8} "
                      f"{acts['peak'] / acts['lower_bound']:11.3f} {moved:6} {st:>8}")


if __name__ == "__main__":
    main()
