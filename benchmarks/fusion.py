#!/usr/bin/env python3
"""Fusion benchmark (not a test): for each model and target, build and run it
with fusion=none, min_latency and min_transfer and print MACs, the L2<->L1
activation bytes (the selector's count, which the firmware's DMA counters
match), the target's count summed over the network's steps (instructions
under QEMU, cycles on GVSoC; the host counts nothing; the whole run's total
also counts the harness's per-layer checks, see build()) and the change against none, next to the fusion
paper's Table 2 (its activation-transfer change, min_latency / min_transfer).

    .venv/bin/python benchmarks/fusion.py [--targets gap8 stm32h7] [--models mbv1_025_128 dscnn_kws]
                                          [--cost model|measured] [--pw-dw auto|rows|channels]
                                          [--out DIR]

--pw-dw builds each model from a copy of its YAML with that fusion_pw_dw
(the PW->DW steps' layout; the bundled YAMLs leave it at auto).

The count is the sum of the per-layer counts (each step's own run, as
the selector compares them), not the harness's total: that total also
holds the harness's per-layer check (a hash of every layer's output and a
line printed), which a fused step's intermediate skips, so it credits
fusion with checking work it does not do (stm32h7 mbv1_025_128: 2.15 M of
27.26 M instructions unfused, 1.06 M fused).

Builds go to a scratch out= directory (--out to keep them); every build must
pass its bit-exact check, else the benchmark stops; a model that does not fit
the target (with a policy) prints the build's one-line error instead.
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
POLICIES = ("none", "min_latency", "min_transfer")
MODELS = ("mbv1_025_128", "mbv1_025_224", "mbv1_025_96", "mbv2_025_128", "mbv2_025_224", "dscnn_kws")


def model_yaml(out, model, pw_dw):
    """The bundled model's YAML with fusion_pw_dw set, under out (same
    name, so the build directory is <out>/<target>/<model>)."""
    if pw_dw is None:
        return model
    folder = os.path.join(out, f"models-{pw_dw}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(ROOT, "models", f"{model}.yaml")) as f:
        text = f.read()
    path = os.path.join(folder, f"{model}.yaml")
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + f"\nfusion_pw_dw: {pw_dw}\n")
    return path


def build(out, target, model, policy, cost, pw_dw=None):
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", f"out={out}", f"target={target}",
           f"model={model_yaml(out, model, pw_dw)}", f"fusion={policy}", f"fusion_cost={cost}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        # a model that does not fit the target is one line (tessera: error: ...); anything else stops here
        errors = [line for line in (res.stdout + res.stderr).splitlines() if line.startswith("tessera: error:")]
        if errors and "fit" in errors[0]:
            return {"error": errors[0][len("tessera: error: "):]}
        sys.exit(f"{model} on {target} with fusion={policy} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    net = os.path.join(out, target, model)
    with open(os.path.join(net, "report.json")) as f:
        rep = json.load(f)
    with open(os.path.join(net, "verdict.json")) as f:
        verdict = json.load(f)
    assert rep["verdict"] == "pass" == verdict["verdict"]
    kinds = [g["step"] for g in rep["fusion"].get("groups", [])]
    # the network's count: its steps' (a fused step's is on its first
    # layer's row). Not the whole run's total, which adds the test harness's
    # per-layer output checksums: fusing drops those of the intermediates, a
    # gain no deployed network sees (pulp_open dscnn_kws, all DW->PW fused:
    # -32% total cycles, +27% in the steps)
    key = {"qemu-instructions": "instructions", "gvsoc-cycles": "cycles"}.get(rep["counts"]["method"])
    count = sum(layer.get(key) or 0 for layer in rep["layers"]) if key else 0
    return {"macs": sum(layer.get("macs", 0) for layer in rep["layers"]),
            "bytes": rep["fusion"]["totals"]["activation_transfer_bytes"],
            "count": count, "run": verdict.get("total_count") or 0, "groups": len(kinds)}


def change(new, old):
    return f"{100.0 * (new - old) / old:+.1f}%" if old else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=["gap8", "stm32h7"])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--cost", default="model", choices=("model", "measured"), help="min_latency's fusion_cost")
    ap.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES,
                    help="none is always built (the baseline)")
    ap.add_argument("--pw-dw", default=None, choices=("auto", "rows", "channels"),
                    help="the models' fusion_pw_dw (PW->DW layout)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="tessera-fusion-")
    print(f"{'target':9} {'model':13} {'policy':13} {'MACs':>10} {'groups':>6} {'act bytes':>10} {'change':>7} "
          f"{'count':>12} {'change':>7}  paper (min_latency / min_transfer)", flush=True)
    for target in args.targets:
        for model in args.models:
            policies = ["none"] + [p for p in args.policies if p != "none"]
            res = {p: build(out, target, model, p, args.cost, args.pw_dw) for p in policies}
            base = res["none"]
            for p in policies:
                r = res[p]
                if "error" in r or "error" in base:
                    print(f"{target:9} {model:13} {p:13} {(r.get('error') or base['error'])[:100]}", flush=True)
                    continue
                paper = " / ".join(PAPER.get(model, ("-", "-"))) if p != "none" else ""
                print(f"{target:9} {model:13} {p:13} {r['macs']:>10} {r['groups']:>6} {r['bytes']:>10} "
                      f"{change(r['bytes'], base['bytes']):>7} {r['count']:>12} {change(r['count'], base['count']):>7}"
                      f"  {paper}", flush=True)


if __name__ == "__main__":
    main()
