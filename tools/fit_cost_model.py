#!/usr/bin/env python3
"""Fit the cost model's coefficients for one target (and its kernel
library) from microbenchmarks run on the target's own runner, and write
kernels/<library>/cost/<target>.yaml.

    .venv/bin/python tools/fit_cost_model.py gap8              # after a kernel change: this, nothing else
    .venv/bin/python tools/fit_cost_model.py gap8 --models tiny dscnn_kws   # sweeps and these models' layers
    .venv/bin/python tools/fit_cost_model.py gap8 --no-sweeps --models tiny dscnn_kws mbv1_025_128

The microbenchmarks are the sweep networks of tessera.cost.sweeps (each op
over channels, kernels, strides and map sizes, so from one whole-layer tile
to many small ones): written as quantized ONNX under OUT/costbench/models/
and built, run and checked like any model (./scons target=T
model=OUT/costbench/models/<sweep>.yaml out=OUT/costbench): QEMU
instructions, GVSoC cycles. SCons is the cache: a sweep whose kernels,
code generator and inputs did not change is a no-op build, and after a
kernel change only what the change feeds is rebuilt and rerun; a refit is
this one command. Every layer of every sweep is one sample of its op.

--models adds the layers of bundled models, read from their report.json
under OUT/<target>/<model> (--build builds the missing ones). The same
reports give the same file.

The fused steps (`fused:` in the file): the fused sweeps of
tessera.cost.fused_sweeps, built under OUT/costbench with
fusion=min_latency fusion_cost=measured (each network apart and with every
feasible DW->PW, then PW->DW, pair fused), fitted by cost/fused_fit.py.
--fused-only refits only them and keeps the file's layer coefficients.

--ops fits only the named ops' compute coefficients (cost/fit.py fit_ops:
each op on its own few terms) on the layers of --models (names, or model
YAML paths such as the corpus transformers'), keeping everything else in
the file: the ops the sweeps do not build (attention's products, softmax,
layernorm, the data movements, tables).

    .venv/bin/python tools/fit_cost_model.py pulp_open --ops matmul softmax layernorm transpose lut \
        --models tests/corpus/torch_kws_transformer.yaml tests/corpus/torch_vit_tiny.yaml --build

--ops without --models fits those ops on the sweeps' layers instead (the
sweeps built or found up to date, as a full fit does): pulp_nn's depthwise
on pulp_open, whose own terms (cost/fit.py OP_TERMS: gathered bytes, plane
rows, the busiest core's channels) the shared two-stage fit cannot give
from its few tiled layers. A full refit refits such ops the same way after
the layers (fitted_on.sweep_ops).

    .venv/bin/python tools/fit_cost_model.py pulp_open --ops depthwise
"""

import argparse
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))

from tessera import config  # noqa: E402
from tessera.cost import features, fit, model, sweeps  # noqa: E402
from tessera.report.build import COUNT_KEYS  # noqa: E402


def _scons(target, model_arg, out, *extra):
    # fusion=none unless asked: the layer sweeps measure layers apart
    extra = extra or ("fusion=none",)
    cmd = [os.path.join(ROOT, "scons"), f"target={target}", f"model={model_arg}", f"out={out}", *extra]
    r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        tail = [l for l in r.stdout.splitlines() if "error" in l.lower()][-1:] or r.stdout.splitlines()[-1:]
        sys.exit(f"{model_arg}: the build on {target} failed ({' '.join(cmd[1:])}): {' '.join(tail)}")


def model_name(m):
    """A --models entry's build directory name: a bundled name, or a YAML path's stem."""
    return os.path.basename(m)[:-len(".yaml")] if m.endswith(".yaml") else m


def report_of(out, target, m, build):
    mname = model_name(m)
    path = os.path.join(out, target, mname, "report.json")
    if build and not os.path.exists(path):
        _scons(target, os.path.abspath(m) if m.endswith(".yaml") else m, out)
    if not os.path.exists(path):
        sys.exit(f"{path}: no report; build it (./scons target={target} model={mname} out={out}) "
                 "or pass --build")
    with open(path) as f:
        return yaml.safe_load(f)   # JSON is YAML


def sweep_reports(target, bench, names=None):
    """{sweep: report} of the sweeps built (or found up to date) on target."""
    models_dir = os.path.join(bench, "models")
    out = {}
    for name in names or sweeps.names_for(target):
        print(f"  sweep {name} on {target}", file=sys.stderr, flush=True)
        _scons(target, sweeps.write(name, models_dir), bench)
        out[name] = report_of(bench, target, name, False)
    return out


def fused_fit_of(target, tcfg, bench, coefs):
    """The `fused:` coefficients from the fused sweeps built on target
    (coefs: the layer coefficients, whose DMA terms price the DMA a fused
    step does not do)."""
    from tessera.cost import fused_fit, fused_sweeps

    models_dir = os.path.join(bench, "models")
    samples, used = [], []
    for name in fused_sweeps.names():
        print(f"  fused sweep {name} on {target}", file=sys.stderr, flush=True)
        cmd = [os.path.join(ROOT, "scons"), f"target={target}", f"model={fused_sweeps.write(name, models_dir)}",
               f"out={bench}", "fusion=min_latency", "fusion_cost=measured"]
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            errors = [line for line in r.stdout.splitlines() if line.startswith("tessera: error:")]
            # a sweep too big for a small target is left out, said so; anything else stops the fit
            if errors and "fit" in errors[0] and "differs" not in errors[0]:
                print(f"  fused sweep {name} left out on {target}: {errors[0]}", file=sys.stderr, flush=True)
                continue
            sys.exit(f"{name}: the build on {target} failed ({' '.join(cmd[1:])}): "
                     f"{(errors or r.stdout.splitlines()[-1:] or ['?'])[0]}")
        samples += fused_fit.group_samples(os.path.join(bench, tcfg["name"], name),
                                           COUNT_KEYS[tcfg["runner"]["counts"]], tcfg, model.for_target(coefs, tcfg))
        used.append(name)
    return fused_fit.fit(samples), used


def samples_of(report, build_dir, tcfg):
    """[(op, features, measured)] per layer: the count from report.json, the
    features recomputed from the build's graph and tilings by this version
    of tessera.cost.features (a report written before a feature was added
    still serves)."""
    key = COUNT_KEYS.get(report["counts"]["method"])
    if key is None or report["counts"]["method"] == "host-ns":
        sys.exit(f"{report['target']}: its runner counts nothing deterministic ({report['counts']['method']}); "
                 "no fit possible (host time varies from run to run)")
    measured = {layer["name"]: layer.get(key) for layer in report["layers"]}
    # a fused step's count is not its layers' (a build with fusion): apart only
    fused = {n for g in report.get("fusion", {}).get("groups", []) for n in g["layers"]}
    out = []
    for name, op, feats in features.build_features(build_dir, tcfg):
        if name in fused:
            continue
        if measured.get(name) is None:
            sys.exit(f"{build_dir}: layer {name} has no measured count in report.json; rebuild it")
        out.append((op, feats, measured[name]))
    return out


def dma_counts(tcfg, build_dir, report):
    """Per layer the instructions the emulated DMA copies took, or None when
    the firmware cannot tell (it prints them, `dmacount=`, in a run with the
    argument `cores`: gap8's HAL under QEMU). The profile run's result is
    kept in the build directory beside the firmware's digest, so a refit
    reruns only a changed firmware."""
    import hashlib
    import json

    from tessera.check import runlog
    from tessera import runners

    src = os.path.join(build_dir, "src", "harness.c")
    if not os.path.exists(src) or "dmacount" not in open(src).read():
        return None
    elf = os.path.join(build_dir, "firmware.elf")
    with open(elf, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    cache = os.path.join(build_dir, "dma_counts.json")
    if os.path.exists(cache):
        with open(cache) as f:
            kept = json.load(f)
        if kept.get("firmware") == digest:
            return kept["counts"]
    run = runlog.parse(runners.run(tcfg["runner"], elf, ["cores"]), f"{build_dir}: profile run")
    key = COUNT_KEYS[report["counts"]["method"]]
    for layer, counted in zip(report["layers"], run["layers"]):
        if counted["count"] != layer[key] or "dma_count" not in counted:
            sys.exit(f"{build_dir}: layer {layer['name']}: the profile run counted {counted['count']}, "
                     f"the build {layer[key]}; rebuild it")
    counts = [layer["dma_count"] for layer in run["layers"]]
    with open(cache, "w") as f:
        json.dump({"firmware": digest, "counts": counts}, f)
    return counts


def fit_target(tcfg, samples, dma_samples=None):
    """Coefficients from samples [(op, features, count)]; dma_samples
    [(features, DMA copy count)], where the runner counts the copies apart,
    fit the dma coefficients on their own first (fit.fit_dma)."""
    # cycles of a cluster with DMA engines overlap; instructions of cores
    # that copy the data themselves (QEMU) add up
    if tcfg["runner"]["counts"] == "gvsoc-cycles":
        return fit.fit_overlap(samples, tcfg)
    return fit.fit(samples, combine="sum", dma=fit.fit_dma(dma_samples) if dma_samples else None)


def _write(file, tcfg, tname, coefs, cmd):
    os.makedirs(os.path.dirname(file), exist_ok=True)
    head = (f"# Cost model of the {tcfg['kernels']} kernels on {tname}: written by\n"
            f"# {cmd}; do not edit.\n"
            "# Meaning of every field: site_scons/tessera/cost/model.py, docs/cost_model.md.\n")
    with open(file, "w") as f:
        f.write(head + yaml.safe_dump(coefs, sort_keys=True))


def refit_recurrent(target, tname, tcfg, bench, file):
    """The op lstm's coefficients from the recurrent sweeps (one TFLite
    LSTM each, cost.sweeps.RECURRENT) built on target, the file's other
    coefficients kept (they price the layers' DMA)."""
    coefs = model.load(file)
    if coefs is None:
        sys.exit(f"{os.path.relpath(file, ROOT)}: no coefficients yet; fit the layers first "
                 f"(tools/fit_cost_model.py {tname})")
    models_dir = os.path.join(bench, "models")
    samples, names = [], sorted(sweeps.RECURRENT)
    for name in names:
        print(f"  recurrent sweep {name} on {target}", file=sys.stderr, flush=True)
        _scons(target, sweeps.write_recurrent(name, models_dir), bench)
        rep = report_of(bench, tname, name, False)
        samples += [(f, m) for op, f, m in samples_of(rep, os.path.join(bench, tname, name), tcfg) if op == "lstm"]
    coefs["ops"]["lstm"] = fit.fit_op(samples, model.for_target(coefs, tcfg))
    coefs["fitted_on"]["recurrent_sweeps"] = names
    with open(file) as f:       # the header names the command that fitted the layers: kept
        cmd = f.read().splitlines()[1].removeprefix("# ").removesuffix("; do not edit.")
    _write(file, tcfg, tname, coefs, cmd)
    print(f"{os.path.relpath(file, ROOT)}: the recurrent step refitted on {len(samples)} layers of {', '.join(names)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target")
    ap.add_argument("--models", nargs="*", default=[], help="bundled models whose layers are added")
    ap.add_argument("--no-sweeps", action="store_true", help="fit on --models only")
    ap.add_argument("--out", default=os.path.join(ROOT, "generated"))
    ap.add_argument("--bench", default=None, help="where the sweeps are built (default OUT/costbench)")
    ap.add_argument("--build", action="store_true", help="build the --models reports that are missing")
    ap.add_argument("--fused-only", action="store_true",
                    help="refit only the fused steps (fused sweeps), keeping the file's layer coefficients")
    ap.add_argument("--ops", nargs="*", default=[],
                    help="fit only these ops' compute coefficients on --models, keeping the rest of the file")
    ap.add_argument("--recurrent-only", action="store_true",
                    help="refit only the recurrent step (op lstm, the recurrent sweeps), keeping the rest")
    args = ap.parse_args()
    tname, tpath = config.resolve("target", args.target, ROOT)
    tcfg = config.load_target(tpath, tname)
    if tcfg["runner"]["counts"] not in COUNT_KEYS or tcfg["runner"]["counts"] == "host-ns":
        sys.exit(f"{tpath}: runner.counts is {tcfg['runner']['counts']!r}: nothing deterministic to fit "
                 "(the cost model needs QEMU instructions or GVSoC cycles)")
    if args.no_sweeps and not args.models:
        sys.exit("fit_cost_model.py: --no-sweeps needs --models (nothing to fit on)")
    bench = args.bench or os.path.join(args.out, "costbench")
    file = model.path(ROOT, tcfg["kernels"], tname)
    if args.fused_only:
        # the layer coefficients as they are; only `fused:` refitted
        coefs = model.load(file)
        if coefs is None:
            sys.exit(f"{os.path.relpath(file, ROOT)}: no coefficients yet; fit the layers first "
                     f"(tools/fit_cost_model.py {tname})")
        coefs["fused"], names = fused_fit_of(args.target, tcfg, bench, coefs)
        coefs["fitted_on"]["fused_sweeps"] = names
        with open(file) as f:       # the header names the command that fitted the layers: kept
            cmd = f.read().splitlines()[1].removeprefix("# ").removesuffix("; do not edit.")
        _write(file, tcfg, tname, coefs, cmd)
        print(f"{os.path.relpath(file, ROOT)}: fused steps refitted on {', '.join(names)}")
        return
    if args.ops:
        fit_ops_only(args, tcfg, tname, file)
        return
    if args.recurrent_only:
        refit_recurrent(args.target, tname, tcfg, bench, file)
        return
    samples, sources, paths, dma_samples = [], {}, set(), []

    def add(rep, build_dir):
        mine = samples_of(rep, build_dir, tcfg)
        samples.extend(mine)
        paths.add(rep.get("kernels", {}).get("path", "?"))
        if tcfg["runner"]["counts"] != "gvsoc-cycles":
            counts = dma_counts(tcfg, build_dir, rep)
            dma_samples.extend((f, c) for (_, f, _), c in zip(mine, counts or ()))
    if not args.no_sweeps:
        reps = sweep_reports(args.target, bench)
        for name, rep in reps.items():
            add(rep, os.path.join(bench, tname, name))
        sources["sweeps"] = sorted(reps)
    for m in args.models:
        add(report_of(args.out, tname, m, args.build), os.path.join(args.out, tname, model_name(m)))
    if args.models:
        sources["models"] = list(args.models)
    if dma_samples and len(dma_samples) != len(samples):
        sys.exit(f"{tname}: some builds count their DMA copies apart and some do not; rebuild them")
    coefs = fit_target(tcfg, samples, dma_samples)
    if dma_samples:
        sources["dma"] = "fitted on the DMA copies' own counts (a profile run of each build)"
    # the kernels' code path (portable C, or Xpulp / DSP intrinsics) the
    # counts come from: coefficients are per target, and a target has one
    coefs = {"target": tname, "library": tcfg["kernels"], "counts": tcfg["runner"]["counts"],
             "kernel_path": ", ".join(sorted(paths)),
             "fitted_on": dict(sources, layers=len(samples)), **coefs}
    if not args.no_sweeps:
        coefs["fused"], coefs["fitted_on"]["fused_sweeps"] = fused_fit_of(args.target, tcfg, bench, coefs)
    # ops an --ops fit priced (attention's, which no sweep builds) stay, unless this fit saw them
    old = model.load(file) or {}
    kept = (old.get("fitted_on") or {}).get("ops")
    if kept:
        seen = {op for op, _, _ in samples}
        coefs["ops"].update({op: old["ops"][op] for op in kept["ops"] if op not in seen and op in old["ops"]})
        coefs["fitted_on"]["ops"] = kept
    # ops fitted on their own terms on the sweeps (--ops without --models): again, on these samples
    again = (old.get("fitted_on") or {}).get("sweep_ops")
    if again and not args.no_sweeps:
        coefs["ops"].update(fit.fit_ops(samples, coefs, again["ops"]))
        coefs["fitted_on"]["sweep_ops"] = dict(again, layers=sum(1 for o, _, _ in samples if o in again["ops"]),
                                               sweeps=sources["sweeps"])
    cmd = f"tools/fit_cost_model.py {tname}" + (" --no-sweeps" if args.no_sweeps else "") + \
        (f" --models {' '.join(args.models)}" if args.models else "")
    _write(file, tcfg, tname, coefs, cmd)
    print(f"{os.path.relpath(file, ROOT)}: {len(samples)} layers of "
          f"{', '.join(sources.get('sweeps', []) + sources.get('models', []))}")


def fit_ops_only(args, tcfg, tname, file):
    """--ops: these ops' coefficients from --models' layers (without --models
    the sweeps'), the rest of the file as it is (its header names the
    command that fitted the layers)."""
    coefs = model.load(file)
    if coefs is None:
        sys.exit(f"{os.path.relpath(file, ROOT)}: no coefficients yet; fit the layers first "
                 f"(tools/fit_cost_model.py {tname})")
    samples, names = [], []
    if args.models:
        for m in args.models:
            samples += samples_of(report_of(args.out, tname, m, args.build),
                                  os.path.join(args.out, tname, model_name(m)), tcfg)
        names = [model_name(m) for m in args.models]
    else:
        # the sweeps, as a full fit builds them
        bench = args.bench or os.path.join(args.out, "costbench")
        for name, rep in sweep_reports(args.target, bench).items():
            samples += samples_of(rep, os.path.join(bench, tname, name), tcfg)
            names.append(name)
    fitted = fit.fit_ops(samples, coefs, args.ops)
    missing = [op for op in args.ops if op not in fitted]
    if not fitted:
        sys.exit(f"{tname}: no layer of {', '.join(args.ops)} in {' '.join(names)} left a count to fit")
    for op in missing:
        print(f"{tname}: {op} left as it was: no layer of it left a count to fit", file=sys.stderr)
    coefs["ops"].update(fitted)
    record = {"ops": sorted(fitted), "layers": sum(1 for o, _, _ in samples if o in fitted),
              **({"left": missing} if missing else {}),
              "command": f"tools/fit_cost_model.py {tname} --ops {' '.join(args.ops)}"
                         + (f" --models {' '.join(args.models)}" if args.models else "")}
    if args.models:
        coefs["fitted_on"]["ops"] = dict(record, models=names)
    else:
        coefs["fitted_on"]["sweep_ops"] = dict(record, sweeps=names)
    with open(file) as f:
        cmd = f.read().splitlines()[1].removeprefix("# ").removesuffix("; do not edit.")
    _write(file, tcfg, tname, coefs, cmd)
    print(f"{os.path.relpath(file, ROOT)}: {', '.join(sorted(fitted))} fitted on {record['layers']} layers of "
          f"{', '.join(names)}")


if __name__ == "__main__":
    from tessera.errors import TesseraError

    try:
        main()
    except TesseraError as err:     # a bad target name or YAML: one line, no traceback
        sys.exit(f"tessera: error: {err}")
