#!/usr/bin/env python3
"""Public models report: build every published int8 model of
../shared/public_models/ and ../shared/mlperf_tiny/ on one target, as a
user would (a model YAML per file, read in place), and say per file whether
it passes: every tensor equal to the TFLite interpreter or every layer within
1 LSB of ONNX Runtime, and the firmware bit-exact against the golden model;
or the build's one-line error.

    .venv/bin/python tools/public_models.py [--target host] [--out DIR] [--only SUBSTRING ...]
                                            [--json FILE] [-j 1]

Each file gets a model YAML in <out>/models/ (ONNX's own QLinearConv test
binds its parameter inputs to the .pb files beside it) and a whole build
(`scons target=<t> model=<yaml> out=<out>`, one after the other). The table
and the JSON (default <out>/public_models-<target>.json) give per file its
verdict, the seconds the build took, and for a failure its one line.
Exit status: 0 when every file passes, 1 otherwise.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
QLINEARCONV_INPUTS = ("x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point")


def files(shared=SHARED):
    """Every model file: [{name, path, kind}], sorted by name."""
    found = []
    for pattern in ("public_models/*/*.tflite", "public_models/*/*.onnx", "mlperf_tiny/*.tflite"):
        for path in glob.glob(os.path.join(shared, pattern)):
            stem = os.path.splitext(os.path.basename(path))[0]
            name = "".join(c if c.isalnum() else "_" for c in stem)
            found.append({"name": name, "path": path, "kind": "tflite" if path.endswith(".tflite") else "onnx",
                          "group": os.path.basename(os.path.dirname(path))})
    return sorted(found, key=lambda f: f["name"])


def yaml_text(f):
    """The model YAML of a file (absolute paths: it reads the file in place)."""
    text = f"description: {f['group']}/{os.path.basename(f['path'])} (published model)\n" \
           f"{f['kind']}: {json.dumps(f['path'])}\ninput: {{seed: 0}}\n"
    if f["name"] == "qlinearconv_model":
        # ONNX's backend test gives the scales and zero points as inputs, their values as test data
        folder = os.path.dirname(f["path"])
        text += "constants:\n" + "".join(f"  {n}: {json.dumps(os.path.join(folder, f'qlinearconv_input_{k}.pb'))}\n"
                                         for k, n in enumerate(QLINEARCONV_INPUTS) if k)
    return text


def write_model(f, models_dir):
    os.makedirs(models_dir, exist_ok=True)
    path = os.path.join(models_dir, f["name"] + ".yaml")
    with open(path, "w") as out:
        out.write(yaml_text(f))
    return path


def build(f, target, out, jobs=1):
    """(returncode, stdout, stderr, seconds) of one file's whole build."""
    model = write_model(f, os.path.join(out, "models"))
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, "-Q", f"-j{jobs}", f"target={target}",
           f"model={model}", f"out={out}"]
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True)
    return res.returncode, res.stdout, res.stderr, round(time.monotonic() - t0, 1)


def verdict(f, target, out, rc, stdout, stderr):
    """{verdict: pass | fail, line}: pass needs the build's success and a
    passing verdict.json; else the one `tessera: error:` line (or the
    last line the build wrote)."""
    vpath = os.path.join(out, target, f["name"], "verdict.json")
    passed = False
    if rc == 0 and os.path.exists(vpath):
        with open(vpath) as fh:
            passed = json.load(fh).get("verdict") == "pass"
    if passed:
        return {"verdict": "pass", "line": ""}
    errors = [line for line in (stderr + stdout).splitlines() if line.startswith("tessera: error:")]
    last = (stderr.strip().splitlines() or stdout.strip().splitlines() or [f"exit status {rc}"])[-1]
    return {"verdict": "fail", "line": (errors[0] if errors else last)[:400]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="host")
    ap.add_argument("--out", default=os.path.join(ROOT, "generated", "public"))
    ap.add_argument("--shared", default=SHARED)
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--json")
    ap.add_argument("-j", type=int, default=1)
    args = ap.parse_args(argv)
    rows = []
    for f in files(args.shared):
        if args.only and not any(o in f["name"] for o in args.only):
            continue
        rc, so, se, secs = build(f, args.target, args.out, args.j)
        row = {"file": os.path.relpath(f["path"], args.shared), "name": f["name"], "seconds": secs,
               **verdict(f, args.target, args.out, rc, so, se)}
        rows.append(row)
        print(f"{row['verdict']:4}  {row['file']:58} {secs:7.1f}s  {row['line']}", flush=True)
    passed = sum(r["verdict"] == "pass" for r in rows)
    print(f"{passed} of {len(rows)} pass on {args.target}")
    path = args.json or os.path.join(args.out, f"public_models-{args.target}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        json.dump({"target": args.target, "passed": passed, "files": rows}, fh, indent=1)
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
