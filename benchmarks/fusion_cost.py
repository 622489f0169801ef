#!/usr/bin/env python3
"""How well fusion_cost=model decides (not a test): for each model and
target, every feasible fused pair's estimate by the cost model against its
measured count, and what min_latency finds with each cost source.

    .venv/bin/python benchmarks/fusion_cost.py [--targets gap8] [--models mbv1_025_128 dscnn_kws] [--out DIR]

Per network two builds: fusion=min_latency fusion_cost=measured (which
builds and runs the network apart and with every feasible pair of each kind
fused: variants/none, all_dw_pw, all_pw_dw) and fusion=min_latency
fusion_cost=model. Per pair: the measured count apart and fused, the
model's estimate fused (its layers' estimates less the fitted saving,
cost/fused.py), the error of that estimate, and the saving measured and
estimated (positive: fused is faster; `ok` when both have the same sign,
`MISSED` when only the measurement saves, `WRONG` when only the model
does; `held apart` when min_latency keeps the pair apart anyway: its
estimated saving is within the fit's median error, no sweep pair of its
kind ran faster, or it runs in more bands than any sweep pair). Per network: the measured count (summed over its steps) with
fusion=none and with min_latency by each cost source (the change against
none). Every build is
bit-exact or the benchmark stops.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))
MODELS = ("mbv1_025_128", "mbv1_025_224", "mbv1_025_96", "mbv2_025_128", "mbv2_025_224", "dscnn_kws")


def build(out, target, model, cost):
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", f"out={out}", f"target={target}", f"model={model}",
           "fusion=min_latency", f"fusion_cost={cost}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        errors = [line for line in (res.stdout + res.stderr).splitlines() if line.startswith("tessera: error:")]
        return errors[0] if errors else f"failed:\n{res.stdout[-1500:]}\n{res.stderr[-1500:]}"
    return None


def read(path):
    with open(path) as f:
        return json.load(f)


def pct(x, base):
    return f"{100.0 * x / base:+.1f}%" if base else "-"


def main():
    from tessera.cost import fused_fit
    from tessera.report.build import COUNT_KEYS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=["gap8"])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="tessera-fusion-cost-")
    summary = []
    tally = {"ok": 0, "MISSED": 0, "WRONG": 0}
    for target in args.targets:
        for model in args.models:
            meas_out, model_out = os.path.join(out, "measured"), os.path.join(out, "model")
            err = build(meas_out, target, model, "measured") or build(model_out, target, model, "model")
            if err:
                # a one-line error (does not fit, a variant tessera cannot
                # build) is printed; anything else stops here
                print(f"\n{target} {model}: {err}", flush=True)
                if not err.startswith("tessera: error:"):
                    sys.exit(1)
                continue
            mdir, edir = os.path.join(meas_out, target, model), os.path.join(model_out, target, model)
            verdicts = {v: read(os.path.join(mdir, "variants", v, "verdict.json")) for v in
                        ("none", "all_dw_pw", "all_pw_dw")}
            verdicts["measured"] = read(os.path.join(mdir, "verdict.json"))
            verdicts["model"] = read(os.path.join(edir, "verdict.json"))
            bad = [k for k, v in verdicts.items() if v["verdict"] != "pass"]
            if bad:
                sys.exit(f"{target} {model}: not bit-exact: {', '.join(bad)}")
            rep = read(os.path.join(mdir, "report.json"))
            key = COUNT_KEYS[rep["counts"]["method"]]
            est = {c["group"]: c for c in read(os.path.join(edir, "schedule.json"))["candidates"]}
            print(f"\n{target} {model} ({rep['counts']['method']})", flush=True)
            print(f"  {'group':12} {'apart':>11} {'fused':>11} {'estimate':>11} {'error':>7} "
                  f"{'saving':>7} {'est.':>7}  decision")
            for kind, _, _, apart, fused, group in fused_fit.group_samples(mdir, key):
                e = est.get(group, {})
                f_est, a_est = e.get("fused_estimate"), e.get("unfused_estimate")
                if f_est is None:
                    print(f"  {group:12} {apart:>11} {fused:>11} {'-':>11} {'-':>7} {pct(apart - fused, apart):>7} "
                          f"{'-':>7}  {e.get('why_apart', e.get('reason', ''))[:60]}")
                    continue
                s_meas, s_est = apart - fused, a_est - f_est
                verdict = "ok" if (s_meas > 0) == (s_est > 0) else ("MISSED" if s_meas > 0 else "WRONG")
                tally[verdict] += 1
                why = e.get("why_apart", "")
                if "median error" in why:
                    verdict += " (held apart: within the fit's error)"
                elif "ran faster than its layers" in why:
                    verdict += " (held apart: no sweep pair of its kind ran faster)"
                elif "bands, more than any fused sweep pair" in why:
                    verdict += " (held apart: more bands than any sweep pair)"
                print(f"  {group:12} {apart:>11} {fused:>11} {f_est:>11} {pct(f_est - fused, fused):>7} "
                      f"{pct(s_meas, apart):>7} {pct(s_est, a_est):>7}  {verdict}", flush=True)
            # the network's count: the sum of its steps' (benchmarks/fusion.py: the
            # run's total also counts the harness's per-layer checks)
            def steps(d):
                return sum(layer.get(key) or 0 for layer in read(os.path.join(d, "report.json"))["layers"])
            none = steps(os.path.join(mdir, "variants", "none"))
            summary.append((target, model, none, steps(edir), steps(mdir)))
    print(f"\npairs: {tally['ok']} decided as measured, {tally['MISSED']} faster fused but kept apart, "
          f"{tally['WRONG']} estimated faster but measured slower")
    print(f"\n{'target':9} {'model':13} {'none':>12} {'min_latency (model)':>24} {'min_latency (measured)':>24}")
    for target, model, none, m, e in summary:
        print(f"{target:9} {model:13} {none:>12} {m:>15} {pct(m - none, none):>8} {e:>15} {pct(e - none, none):>8}")


if __name__ == "__main__":
    main()
