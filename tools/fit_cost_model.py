#!/usr/bin/env python3
"""Fit the cost model's coefficients for one target (and its kernel
library) from measured builds, and write kernels/<library>/cost/<target>.yaml.

    .venv/bin/python tools/fit_cost_model.py gap8 [--models tiny dscnn_kws mbv1_025_128]
                                                  [--out generated] [--build]

The measurements are the layers of the given models built, run and checked
on the target's own runner (QEMU instructions, GVSoC cycles): every layer is
one microbenchmark of its op at its tile shape. --build builds whatever is
missing (./scons target=T model=M out=OUT); without it, the existing
report.json files are read (a cache: rerun with --build after the kernels
change, the report then carries the new counts). Rerunnable: the same
reports give the same file.
"""

import argparse
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))

from tessera import config  # noqa: E402
from tessera.cost import fit, model  # noqa: E402
from tessera.report.build import COUNT_KEYS  # noqa: E402

DEFAULT_MODELS = ["tiny", "dscnn_kws", "mbv1_025_128"]


def report_of(out, target, mname, build):
    path = os.path.join(out, target, mname, "report.json")
    if build and not os.path.exists(path):
        cmd = [os.path.join(ROOT, "scons"), f"target={target}", f"model={mname}", f"out={out}"]
        subprocess.run(cmd, cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
    if not os.path.exists(path):
        sys.exit(f"{path}: no report; build it (./scons target={target} model={mname} out={out}) "
                 "or pass --build")
    return yaml.safe_load(open(path))   # JSON is YAML


def samples_of(report):
    key = COUNT_KEYS.get(report["counts"]["method"])
    if key is None:
        sys.exit(f"{report['target']}: its runner counts nothing ({report['counts']['method']}); "
                 "no fit possible (host time is not deterministic)")
    out = []
    for layer in report["layers"]:
        if "cost" not in layer:
            sys.exit(f"{report['target']}/{report['model']}: report.json has no cost features; rebuild it")
        out.append((layer["op"], layer["cost"]["features"], layer[key]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target")
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    ap.add_argument("--out", default=os.path.join(ROOT, "generated"))
    ap.add_argument("--build", action="store_true", help="build the reports that are missing")
    args = ap.parse_args()
    tname, tpath = config.resolve("target", args.target, ROOT)
    tcfg = config.load_target(tpath, tname)
    samples = []
    for m in args.models:
        samples += samples_of(report_of(args.out, tname, m, args.build))
    # cycles of a cluster with DMA engines overlap; instructions of cores
    # that copy the data themselves (QEMU) add up
    if tcfg["runner"]["counts"] == "gvsoc-cycles":
        coefs = fit.fit_overlap(samples, tcfg)
    else:
        coefs = fit.fit(samples, combine="sum")
    coefs = {"target": tname, "library": tcfg["kernels"], "counts": tcfg["runner"]["counts"],
             "fitted_on": {"models": list(args.models), "layers": len(samples)}, **coefs}
    file = model.path(ROOT, tcfg["kernels"], tname)
    os.makedirs(os.path.dirname(file), exist_ok=True)
    head = (f"# Cost model of the {tcfg['kernels']} kernels on {tname}: written by\n"
            f"# tools/fit_cost_model.py {tname} --models {' '.join(args.models)}; do not edit.\n"
            "# Meaning of every field: site_scons/tessera/cost/model.py, docs/cost_model.md.\n")
    with open(file, "w") as f:
        f.write(head + yaml.safe_dump(coefs, sort_keys=True))
    print(f"{os.path.relpath(file, ROOT)}: {len(samples)} layers of {', '.join(args.models)}")


if __name__ == "__main__":
    main()
