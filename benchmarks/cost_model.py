#!/usr/bin/env python3
"""Cost model validation (not a test): for every bundled model on gap8,
stm32h7, stm32f4 (and pulp_open when its builds exist), each layer's
estimate (kernels/<library>/cost/<target>.yaml) against the count its
runner measured, the per-layer error, the median |error| per model and per
op, and the network total's error (sum of the layers).

    .venv/bin/python benchmarks/cost_model.py [--targets gap8 stm32h7 stm32f4]
        [--models tiny dscnn_kws mbv1_025_128 ...] [--out generated] [--build] [--holdout] [-v]

The measurements are the builds' report.json files under --out (a cache:
--build builds the missing ones, once; big models take minutes under QEMU).
--holdout estimates each model with coefficients fitted on the other
models only (how well the model predicts a network it never saw); without
it, the committed coefficients are used. Goal: median |error| per layer
<= 10%, network total within 5%.
"""

import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from fit_cost_model import report_of, samples_of  # noqa: E402
from tessera import config  # noqa: E402
from tessera.cost import fit, model  # noqa: E402

MODELS = ["tiny", "dscnn_kws", "mbv1_025_128", "mbv1_05_192", "mbv1_128", "mbv2_128"]


def pct(x):
    return f"{100 * x:+.1f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=["gap8", "stm32h7", "stm32f4", "pulp_open"])
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--out", default=os.path.join(ROOT, "generated"))
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--holdout", action="store_true")
    ap.add_argument("-v", action="store_true", help="every layer, not only the summaries")
    args = ap.parse_args()
    for target in args.targets:
        tname, tpath = config.resolve("target", target, ROOT)
        tcfg = config.load_target(tpath, tname)
        reports = {}
        for m in args.models:
            if args.build or os.path.exists(os.path.join(args.out, tname, m, "report.json")):
                reports[m] = report_of(args.out, tname, m, args.build)
        committed = model.load(model.path(ROOT, tcfg["kernels"], tname))
        if not reports or (committed is None and not args.holdout):
            print(f"\n{tname}: skipped ({'no measurements under ' + args.out if not reports else 'no coefficients'})")
            continue
        print(f"\n{tname} ({tcfg['kernels']}, {tcfg['runner']['counts']}; "
              f"{'held-out fits' if args.holdout else 'coefficients ' + model.path('', tcfg['kernels'], tname)})")
        print(f"{'model':14} {'layers':>6} {'median |err|':>12} {'total measured':>15} {'total est.':>12} {'total err':>9}")
        by_op = {}
        for m, rep in reports.items():
            samples = samples_of(rep)
            coefs = committed
            if args.holdout:
                others = [s for o, r in reports.items() if o != m for s in samples_of(r)]
                if not others:
                    continue
                coefs = (fit.fit_overlap(others, tcfg) if tcfg["runner"]["counts"] == "gvsoc-cycles"
                         else fit.fit(others))
            errs, tm, te = [], 0, 0
            for layer, (op, feats, measured) in zip(rep["layers"], samples):
                est = model.estimate(coefs, op, feats)
                err = (est - measured) / measured if measured else 0.0
                errs.append(abs(err))
                by_op.setdefault(op, []).append(abs(err))
                tm, te = tm + measured, te + est
                if args.v:
                    print(f"    {layer['name']:24} {op:10} {measured:>12} {est:>12} {pct(err):>8}")
            print(f"{m:14} {len(errs):>6} {100 * statistics.median(errs):>11.1f}% {tm:>15} {te:>12} "
                  f"{pct((te - tm) / tm):>9}")
        print("  per op: " + ", ".join(f"{op} {100 * statistics.median(v):.1f}% (n={len(v)})"
                                       for op, v in sorted(by_op.items())))


if __name__ == "__main__":
    main()
