#!/usr/bin/env python3
"""Fusion benchmark (not a test): for each model, build and run it with
fusion=none and fusion=min_transfer and print MACs, the L2<->L1 activation
bytes (the selector's count, which the host's DMA counter matches), the
target's count (instructions under QEMU, cycles on GVSoC; the host counts
nothing) and the change against none, next to the fusion paper's Table 2.

    .venv/bin/python benchmarks/fusion.py [--target gap8] [--models mbv1_025_128 dscnn_kws]

Builds go to a scratch out= directory (--out to keep them); every build must
pass its bit-exact check.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the paper's activation-transfer change, min_latency / min_transfer (Table 2)
PAPER = {"mbv1_025_128": ("-27.3%", "-47.7%"), "mbv2_025_128": ("-30.4%", "-53.0%"),
         "dscnn_kws": ("-11.1%", "-44.2%")}
POLICIES = ("none", "min_transfer")


def build(out, target, model, policy):
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", f"out={out}", f"target={target}", f"model={model}",
           f"fusion={policy}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{model} on {target} with fusion={policy} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    net = os.path.join(out, target, model)
    with open(os.path.join(net, "report.json")) as f:
        rep = json.load(f)
    with open(os.path.join(net, "verdict.json")) as f:
        verdict = json.load(f)
    assert rep["verdict"] == "pass"
    return {"macs": sum(layer.get("macs", 0) for layer in rep["layers"]),
            "bytes": rep["fusion"]["totals"]["activation_transfer_bytes"],
            "count": verdict.get("total_count", 0)}


def change(new, old):
    return f"{100.0 * (new - old) / old:+.1f}%" if old else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="host")
    ap.add_argument("--models", nargs="+", default=["mbv1_025_128", "dscnn_kws"])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="tessera-fusion-")
    print(f"{'model':14} {'policy':13} {'MACs':>10} {'act bytes':>10} {'change':>8} {'count':>12} {'change':>8}"
          f"  paper (min_latency / min_transfer)")
    for model in args.models:
        res = {p: build(out, args.target, model, p) for p in POLICIES}
        base = res["none"]
        for p in POLICIES:
            r = res[p]
            paper = " / ".join(PAPER.get(model, ("-", "-"))) if p != "none" else ""
            print(f"{model:14} {p:13} {r['macs']:>10} {r['bytes']:>10} {change(r['bytes'], base['bytes']):>8} "
                  f"{r['count']:>12} {change(r['count'], base['count']):>8}  {paper}")


if __name__ == "__main__":
    main()
