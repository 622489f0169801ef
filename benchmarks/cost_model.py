#!/usr/bin/env python3
"""Cost model validation (not a test): for every bundled model on gap8,
pulp_open (GVSoC), stm32h7 and stm32f4, each layer's estimate
(kernels/<library>/cost/<target>.yaml) against the count its runner
measured: the median |error| per layer and the network total's error (sum
of the layers) per model, against the goals (median <= 10%, total within
5%), and per op the median |error| with the op's worst layer.

    .venv/bin/python benchmarks/cost_model.py [--targets gap8 pulp_open stm32h7 stm32f4]
        [--models tiny dscnn_kws ...]   (default: every models/*.yaml) [--out generated] [--build] [--holdout] [-v]

The measurements are the builds' report.json files under --out (a cache:
--build builds the missing ones, once; big models take minutes under QEMU
and GVSoC; a model that does not fit a target is reported and skipped).
The committed coefficients are fitted on the microbenchmark sweeps
(tools/fit_cost_model.py), so every bundled model is one the fit never saw.
--holdout instead fits each model on the other models' layers only.
"""

import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from fit_cost_model import fit_target, samples_of  # noqa: E402
from tessera import config  # noqa: E402
from tessera.cost import model  # noqa: E402

import yaml  # noqa: E402

# every bundled model (models/*.yaml); one a target cannot hold is skipped with the build's reason
MODELS = sorted(f[:-5] for f in os.listdir(os.path.join(ROOT, "models")) if f.endswith(".yaml"))
GOAL_LAYER, GOAL_TOTAL = 0.10, 0.05


def pct(x):
    return f"{100 * x:+.1f}%"


def load_report(out, target, m, build):
    path = os.path.join(out, target, m, "report.json")
    if not os.path.exists(path) and build:
        # fusion=none: the estimates compared are per layer, apart
        r = subprocess.run([os.path.join(ROOT, "scons"), f"target={target}", f"model={m}", f"out={out}", "fusion=none"],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            lines = r.stdout.splitlines()
            err = [l for l in lines if "tessera: error" in l][:1] or [l for l in lines if "error" in l][-1:]
            return None, " ".join(err)[:200] or "build failed"
    if not os.path.exists(path):
        return None, "not built (--build)"
    with open(path) as f:
        return yaml.safe_load(f), None


def fitted_on(coefs):
    src = coefs.get("fitted_on", {})
    return "; ".join(f"{k} {' '.join(v)}" for k, v in sorted(src.items()) if isinstance(v, list))


def shape_note(layer):
    i, o = layer.get("in_shape"), layer.get("out_shape")
    return f"{i}->{o}" if i and o else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=["gap8", "pulp_open", "stm32h7", "stm32f4"])
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--out", default=os.path.join(ROOT, "generated"))
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--holdout", action="store_true")
    ap.add_argument("-v", action="store_true", help="every layer, not only the summaries")
    args = ap.parse_args()
    for target in args.targets:
        tname, tpath = config.resolve("target", target, ROOT)
        tcfg = config.load_target(tpath, tname)
        reports, missing = {}, {}
        for m in args.models:
            rep, why = load_report(args.out, tname, m, args.build)
            if rep is None:
                missing[m] = why
            else:
                reports[m] = rep
        cfile, _ = model.source(ROOT, tcfg)    # the target's own, or the file its cost_model names
        committed = model.for_target(model.load(cfile), tcfg)
        cfile = os.path.relpath(cfile, ROOT)
        print(f"\n{tname} ({tcfg['kernels']}, {tcfg['runner']['counts']}; "
              f"{'held-out fits on the other models' if args.holdout else 'coefficients ' + cfile}"
              + (f", fitted on {fitted_on(committed)}" if committed and not args.holdout else "") + ")")
        for m, why in missing.items():
            print(f"  {m}: skipped ({why})")
        if not reports or (committed is None and not args.holdout):
            print("  nothing to compare")
            continue
        print(f"{'model':14} {'layers':>6} {'median |err|':>12} {'total measured':>15} {'total est.':>12} "
              f"{'total err':>9}  goals (<=10%, <=5%)")
        by_op = {}
        for m, rep in reports.items():
            samples = samples_of(rep, os.path.join(args.out, tname, m), tcfg)
            coefs = committed
            if args.holdout:
                others = [s for o, r in reports.items() if o != m
                          for s in samples_of(r, os.path.join(args.out, tname, o), tcfg)]
                if not others:
                    continue
                coefs = fit_target(tcfg, others)
            errs, tm, te = [], 0, 0
            for layer, (op, feats, measured) in zip(rep["layers"], samples):
                est = model.estimate(coefs, op, feats)
                err = (est - measured) / measured if measured else 0.0
                errs.append(abs(err))
                by_op.setdefault(op, []).append((abs(err), err, m, layer["name"], shape_note(layer)))
                tm, te = tm + measured, te + est
                if args.v:
                    print(f"    {layer['name']:24} {op:10} {measured:>12} {est:>12} {pct(err):>8}  {shape_note(layer)}")
            med, tot = statistics.median(errs), (te - tm) / tm
            verdict = ("met" if med <= GOAL_LAYER else "MISSED") + " / " + ("met" if abs(tot) <= GOAL_TOTAL else "MISSED")
            print(f"{m:14} {len(errs):>6} {100 * med:>11.1f}% {tm:>15} {te:>12} {pct(tot):>9}  {verdict}")
        print("  per op (median |err|, worst layer):")
        for op, v in sorted(by_op.items()):
            med = statistics.median(e[0] for e in v)
            worst = max(v)
            print(f"    {op:10} {100 * med:5.1f}% n={len(v):<3} {'' if med <= GOAL_LAYER else 'over 10%; '}"
                  f"worst {worst[2]}/{worst[3]} {pct(worst[1])} {worst[4]}")


if __name__ == "__main__":
    from tessera.errors import TesseraError

    try:
        main()
    except TesseraError as err:     # a bad target name or YAML: one line, no traceback
        sys.exit(f"tessera: error: {err}")
