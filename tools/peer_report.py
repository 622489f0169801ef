#!/usr/bin/env python3
"""Peer report: build every DORY and Deeploy peer network on one target and
say, per network, whether the firmware reproduces tessera's golden model
and the peer toolchain's own expected outputs, bit for bit.

    .venv/bin/python tools/peer_report.py [--target host] [--out DIR] [--peer DIR | --deeploy [SNAPSHOT]]
                                          [--only SUBSTRING ...] [--json FILE] [-j 2] [--fusion POLICY]

Each network in <peer>/deeploy/** and <peer>/dory/* (default: the
checkout's ../shared/peer_tests), or with --deeploy [SNAPSHOT] Deeploy's
integer transformer graphs from a snapshot of its repository, gets a model YAML in <out>/models/ (its
`onnx:` and `reference:` point at the peer folder, read in place) and a
whole build (`scons target=<t> model=<yaml> out=<out>`, one after the
other, each with -j). The table and the JSON (default
<out>/peer_report-<target>.json) give per network: its dialect, its layers,
the verdict against the golden model and against the reference, what the
reference compared, the activation level's peak against what it can hold
(and what moved to a slower level), and for a failure the first differing layer and element, or the build's
one-line error (a network that does not fit the target says so there).
Exit status: 0 when every network passes, 1 otherwise.
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.normpath(os.path.join(ROOT, "..", "shared", "peer_tests"))

# the networks whose whole-model builds the issue asks for on every target
MODELS = ("deeploy_CNN_Linear1", "deeploy_miniMobileNet", "deeploy_miniMobileNetv2",
          "dory_Residual_connection_test_1", "dory_dronet_2_0")

# Deeploy's integer transformer test graphs (issue 27), from a snapshot of
# github.com/pulp-platform/Deeploy (not in ../shared/peer_tests): the folders
# under DeeployTest/Tests whose files the snapshot holds and tessera lowers
DEEPLOY_TRANSFORMERS = ("Models/EEGFormer", "Models/CCT/Int/ICCT", "Models/CCT/Int/ICCT_ITA",
                        "Kernels/Integer/Attention", "Kernels/Integer/Softmax/Regular",
                        "Kernels/Integer/Softmax/Large")
DEEPLOY_FILES = ("network.onnx", "inputs.npz", "outputs.npz")
# where a snapshot is looked for when TESSERA_DEEPLOY is unset: the fetch
# tool's mirror beside the checkout (a git directory, no work tree)
DEEPLOY_SNAPSHOTS = [os.path.normpath(os.path.join(ROOT, *up, ".mirror", "pulp-platform+Deeploy", "repo"))
                     for up in ((".."), ("..", ".."))]
DEEPLOY_HOWTO = ("set TESSERA_DEEPLOY to a checkout of https://github.com/pulp-platform/Deeploy "
                 "(git clone; tested at bf64cfae) or to its git directory")


def deeploy_snapshot(path=None):
    """The Deeploy snapshot to read: `path`, $TESSERA_DEEPLOY, or the mirror
    beside the checkout; None when there is none."""
    for p in [path, os.environ.get("TESSERA_DEEPLOY")] + ([] if path else DEEPLOY_SNAPSHOTS):
        if p and (os.path.isdir(os.path.join(p, "DeeployTest", "Tests")) or _git_dir(p)):
            return os.path.abspath(p)
    return None


def _git_dir(p):
    return os.path.isfile(os.path.join(p, "HEAD")) and os.path.isdir(os.path.join(p, "objects"))


def deeploy_networks(snapshot, cache):
    """DEEPLOY_TRANSFORMERS of a snapshot as networks() rows: read in place
    from a checkout; from a git directory (no work tree), each folder's
    three files are written once into `cache` (outside the repository),
    under the snapshot's commit."""
    tests = os.path.join(snapshot, "DeeployTest", "Tests")
    if not os.path.isdir(tests):
        commit = subprocess.run(["git", f"--git-dir={snapshot}", "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        tests = os.path.join(cache, f"deeploy-{commit[:12]}", "DeeployTest", "Tests")
        for rel in DEEPLOY_TRANSFORMERS:
            for f in DEEPLOY_FILES:
                dst = os.path.join(tests, rel, f)
                if os.path.isfile(dst):
                    continue
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                blob = subprocess.run(["git", f"--git-dir={snapshot}", "show", f"{commit}:DeeployTest/Tests/{rel}/{f}"],
                                      capture_output=True, check=True).stdout
                with open(dst + ".part", "wb") as fh:
                    fh.write(blob)
                os.replace(dst + ".part", dst)
    found = []
    for rel in DEEPLOY_TRANSFORMERS:
        d = os.path.join(tests, rel)
        short = rel.replace("Kernels/Integer/", "").replace("Models/", "").replace("CCT/Int/", "")
        found.append({"name": "deeploy_" + "".join(c if c.isalnum() else "_" for c in short), "kind": "deeploy",
                      "rel": rel, "short": short, "dir": d, "onnx": os.path.join(d, "network.onnx")})
    return found


def networks(peer=PEER):
    """Every peer network: {name, kind, rel, dir, onnx}, sorted by name. The
    name is the model name of its build (the output folder's)."""
    found = []
    for kind in ("deeploy", "dory"):
        base = os.path.join(peer, kind)
        if not os.path.isdir(base):
            continue
        for d, _, files in os.walk(base):
            onnx = sorted(f for f in files if f.endswith(".onnx"))
            if not onnx:
                continue
            rel = os.path.relpath(d, base)
            short = rel.replace(os.sep, "/").replace("Kernels/Integer/", "").replace("Models/", "")
            name = kind + "_" + "".join(c if c.isalnum() else "_" for c in short)
            found.append({"name": name, "kind": kind, "rel": rel.replace(os.sep, "/"), "short": short, "dir": d,
                          "onnx": os.path.join(d, onnx[0])})
    return sorted(found, key=lambda n: n["name"])


def write_model(net, models_dir):
    """The model YAML of a peer network (absolute paths: it reads the peer
    folder in place)."""
    os.makedirs(models_dir, exist_ok=True)
    path = os.path.join(models_dir, net["name"] + ".yaml")
    text = (f"description: {net['kind']} {net['rel']} (peer network)\n"
            f"onnx: {json.dumps(net['onnx'])}\n"
            f"reference: {{kind: {net['kind']}, dir: {json.dumps(net['dir'])}}}\n")
    with open(path, "w") as f:
        f.write(text)
    return path


def build(net, target, out, jobs=2, env=None, fusion=None):
    """Build, run and check one network; (returncode, stdout, stderr, seconds)."""
    model = write_model(net, os.path.join(out, "models"))
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", f"-j{jobs}", f"target={target}",
           f"model={model}", f"out={out}"] + ([f"fusion={fusion}"] if fusion else [])
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return res.returncode, res.stdout, res.stderr, round(time.monotonic() - t0, 1)


def _read(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _error_line(stdout, stderr):
    for line in (stderr + "\n" + stdout).splitlines():
        if line.startswith("tessera: error:"):
            return line[len("tessera: error:"):].strip()
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else "the build failed without a message"


def summarize(net, target, out, rc=0, stdout="", stderr="", seconds=None):
    """One row of the report, from what the build left in its folder."""
    folder = os.path.join(out, os.path.splitext(os.path.basename(target))[0], net["name"])
    graph = _read(os.path.join(folder, "graph.json"))
    verdict = _read(os.path.join(folder, "verdict.json"))
    report = _read(os.path.join(folder, "report.json"))
    row = {"network": net["name"], "kind": net["kind"], "path": net["rel"], "short": net["short"],
           "target": report["target"]
           if report else os.path.splitext(os.path.basename(target))[0], "seconds": seconds}
    if graph is not None:
        row["dialect"] = graph["dialect"]
        row["layers"] = [{"name": layer["name"], "op": layer["op"],
                          "output": graph["tensors"][layer["output"]]["shape"],
                          "dtype": graph["tensors"][layer["output"]]["dtype"]} for layer in graph["layers"]]
        row["input"] = [graph["tensors"][n]["shape"] for n in graph["inputs"]]
    if verdict is not None:
        ref = verdict.get("reference") or {}
        row["verdict_golden"] = verdict.get("golden", verdict["verdict"])
        row["verdict_reference"] = ref.get("verdict", "none")
        row["reference_compared"] = ref.get("compared_by")
        row["verdict"] = verdict["verdict"]
        bad = verdict.get("first_mismatch")
        if bad is not None:
            row["first_difference"] = {"against": "golden", "layer": bad["layer"], "element": bad.get("element")}
        else:
            for r in ref.get("compared", []):
                if not r.get("equal", True):
                    row["first_difference"] = {"against": ref["kind"], "layer": r.get("layer"), "file": r["name"],
                                               "element": r.get("first"), "error": r.get("error")}
                    break
    if report is not None:
        acts = next((dict(m, level=k) for k, m in report["memory"].items() if "activations" in m["holds"]), None)
        if acts:
            row["activations"] = {"level": acts["level"], "peak": acts["peak"], "usable": acts["usable"]}
            # tensors the activation level could not hold, moved to a slower one (GAP8's L3)
            for level, m in report["memory"].items():
                if m.get("spilled_activations"):
                    row["activations"]["moved"] = {"level": level, "bytes": m["spilled_activations"]}
    if rc != 0:
        row["error"] = _error_line(stdout, stderr)
        if row.get("verdict") != "fail":
            row["verdict"] = "error"    # stopped before the check, or a step after it failed
    return row


def _ops(layers):
    counts = {}
    for layer in layers:
        counts[layer["op"]] = counts.get(layer["op"], 0) + 1
    return ", ".join(f"{n} {op}" if n > 1 else op for op, n in counts.items())


def render(rows, target, console=None):
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # a pipe or a CI log gets a wide table rather than rich's 80 columns
    console = console or Console(width=None if sys.stdout.isatty() else 180)
    table = Table(title=f"peer networks on {target}")
    for col in ("network", "dialect", "layers", "input", "vs golden", "vs reference", "activations",
                "first difference / error"):
        table.add_column(col, overflow="fold")
    mark = {"pass": "pass", "fail": "[red]FAIL[/red]", "none": "-", None: "-"}
    for r in rows:
        layers = r.get("layers", [])
        acts = r.get("activations")
        note = r.get("error", "") if r.get("verdict") != "fail" else ""
        diff = r.get("first_difference")
        if diff:
            el = diff.get("element") or {}
            note = (f"{diff['against']}: layer {diff.get('layer')}" + (f" ({diff['file']})" if diff.get("file") else "")
                    + (f" at {el.get('index')}: {el.get('got')} vs {el.get('want', el.get('expected'))}" if el else "")
                    + (f": {diff['error']}" if diff.get("error") else ""))
        table.add_row(f"{r['kind']} {r['short']}", r.get("dialect", "?"),
                      f"{len(layers)}: {_ops(layers)}" if layers else "-",
                      " + ".join("x".join(map(str, s)) for s in r.get("input", [])) or "-",
                      "[red]error[/red]" if r.get("verdict") == "error" and "verdict_golden" not in r
                      else mark.get(r.get("verdict_golden"), r.get("verdict_golden", "-")),
                      mark.get(r.get("verdict_reference"), r.get("verdict_reference", "-")),
                      (f"{acts['peak']}/{acts['usable']} B {acts['level']}"
                       + (f" + {acts['moved']['bytes']} B in {acts['moved']['level']}" if "moved" in acts else ""))
                      if acts else "-",
                      f"[red]{escape(note)}[/red]" if note else "")
    console.print(table)
    passed = sum(r.get("verdict") == "pass" for r in rows)
    console.print(f"{passed} of {len(rows)} networks bit-exact against the golden model and their reference on {target}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="host", help="a name in targets/ or a target YAML")
    ap.add_argument("--out", default=os.path.join(ROOT, "generated", "peers"), help="output folder")
    ap.add_argument("--peer", default=PEER, help="the peer_tests folder")
    ap.add_argument("--deeploy", nargs="?", const="", default=None, metavar="SNAPSHOT",
                    help="Deeploy's integer transformer graphs from a snapshot of its repository instead "
                         f"({', '.join(DEEPLOY_TRANSFORMERS)}): a checkout or its git directory "
                         "(default: $TESSERA_DEEPLOY, else the fetch tool's mirror)")
    ap.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "tessera"),
                    help="where files of a git-directory snapshot are written (outside the repository)")
    ap.add_argument("--only", nargs="*", default=[], help="networks whose name contains one of these")
    ap.add_argument("--models", action="store_true", help=f"only the whole models ({', '.join(MODELS)})")
    ap.add_argument("--json", help="where the JSON goes (default <out>/peer_report-<target>.json)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--fusion", help="the fusion= policy of every build (default: the model's, none)")
    args = ap.parse_args(argv)
    if args.deeploy is not None:
        snap = deeploy_snapshot(args.deeploy or None)
        if snap is None:
            sys.exit(f"peer_report: error: no Deeploy snapshot ({DEEPLOY_HOWTO})")
        nets = deeploy_networks(snap, args.cache)
    elif not os.path.isdir(args.peer):
        sys.exit(f"peer_report: error: no peer networks at {args.peer} (give --peer <peer_tests folder>)")
    else:
        nets = networks(args.peer)
    if args.models:
        nets = [n for n in nets if n["name"] in MODELS]
    if args.only:
        nets = [n for n in nets if any(s in n["name"] for s in args.only)]
    out = os.path.abspath(args.out)
    rows = []
    for net in nets:
        print(f"building {net['name']} on {args.target} ...", file=sys.stderr, flush=True)
        rc, so, se, secs = build(net, args.target, out, args.jobs, fusion=args.fusion)
        rows.append(summarize(net, args.target, out, rc, so, se, secs))
    tname = os.path.splitext(os.path.basename(args.target))[0]
    path = args.json or os.path.join(out, f"peer_report-{tname}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)   # no network matched: nothing made it
    with open(path, "w") as f:
        json.dump({"target": tname, "networks": rows}, f, indent=1, sort_keys=True)
        f.write("\n")
    render(rows, tname)
    print(f"JSON: {path}", file=sys.stderr)
    return 0 if rows and all(r.get("verdict") == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
