#!/usr/bin/env python3
"""Build every bundled model and every shared peer network with the default
fusion (fusion=min_latency, fusion_cost=model) on host, gap8 and stm32h7,
and print per build: bit-exact or not, the fused groups the selector took,
the count, or the build's one-line error (a model that does not fit a
target says so).

    .venv/bin/python tools/fusion_check.py [--targets host gap8 stm32h7] [--models tiny dscnn_kws]
                                           [--peers] [--no-peers] [--out DIR] [--json FILE]

--models defaults to every model in models/; peer networks (DORY and
Deeploy, ../shared/peer_tests, as tools/peer_report.py finds them) are
added unless --no-peers. A build fails the table when it is not bit-exact
or stops with an error that is not "does not fit" (exit status 1). Builds
go to --out (default generated/fusion_check), one after the other, with -j2.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import peer_report  # noqa: E402

# an error that says the model does not fit the target, not a failure
DOES_NOT_FIT = ("does not fit", "do not fit", "exceed", "need", "too big", "too large", "overflow")


def bundled():
    return sorted(os.path.basename(p)[:-len(".yaml")] for p in glob.glob(os.path.join(ROOT, "models", "*.yaml")))


def build(target, model, name, out):
    t0 = time.monotonic()
    cmd = [os.path.join(ROOT, "scons"), "-j2", f"target={target}", f"model={model}", f"out={out}"]
    r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    row = {"target": target, "model": name, "seconds": round(time.monotonic() - t0, 1)}
    net = os.path.join(out, target, name)
    if r.returncode != 0:
        errors = [line for line in r.stdout.splitlines() if line.startswith("tessera: error:")]
        line = errors[0][len("tessera: error: "):] if errors else (r.stdout.splitlines() or ["?"])[-1]
        fits = not any(w in line for w in DOES_NOT_FIT) or "differs" in line
        return dict(row, result="FAIL" if fits else "does not fit", error=line)
    with open(os.path.join(net, "report.json")) as f:
        rep = json.load(f)
    with open(os.path.join(net, "schedule.json")) as f:
        sched = json.load(f)
    ok = rep["verdict"] == "pass"
    groups = [s["step"] for s in sched["steps"] if s["kind"] != "layer"]
    return dict(row, result="PASS" if ok else "FAIL", policy=sched["policy"], groups=groups,
                candidates=sum(1 for c in sched["candidates"] if c["fusable"]),
                count=rep.get("totals", {}).get("measured") or _total(net),
                bytes=sched["totals"]["activation_transfer_bytes"],
                unfused_bytes=sched["totals"]["unfused_activation_transfer_bytes"])


def _total(net):
    with open(os.path.join(net, "verdict.json")) as f:
        return json.load(f).get("total_count")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=["host", "gap8", "stm32h7"])
    ap.add_argument("--models", nargs="*", default=None, help="bundled models (default: all)")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--peer", default=peer_report.PEER)
    ap.add_argument("--out", default=os.path.join(ROOT, "generated", "fusion_check"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    models = [(m, m) for m in (bundled() if args.models is None else args.models)]
    if not args.no_peers and os.path.isdir(args.peer):
        for net in peer_report.networks(args.peer):
            models.append((peer_report.write_model(net, os.path.join(args.out, "models")), net["name"]))
    rows = []
    print(f"{'target':8} {'model':34} {'result':12} {'fused':>5} {'act bytes':>17} {'count':>12}  groups / error",
          flush=True)
    for target in args.targets:
        for model, name in models:
            r = build(target, model, name, args.out)
            rows.append(r)
            if "error" in r:
                print(f"{target:8} {name:34} {r['result']:12} {'':>5} {'':>17} {'':>12}  {r['error'][:110]}",
                      flush=True)
            else:
                moved = f"{r['bytes']}/{r['unfused_bytes']}"
                print(f"{target:8} {name:34} {r['result']:12} {len(r['groups']):>5} {moved:>17} "
                      f"{r['count'] or '-':>12}  {' '.join(r['groups'])[:110]}", flush=True)
    passed = sum(r["result"] == "PASS" for r in rows)
    nofit = sum(r["result"] == "does not fit" for r in rows)
    failed = [f"{r['target']}/{r['model']}" for r in rows if r["result"] == "FAIL"]
    print(f"\n{passed} bit-exact, {nofit} do not fit their target, {len(failed)} failed"
          + (f": {', '.join(failed)}" if failed else ""))
    path = args.json or os.path.join(args.out, "fusion_check.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(rows, f, indent=1, sort_keys=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
