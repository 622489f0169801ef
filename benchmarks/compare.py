"""What the benchmarks that compare two builds share: a source tree of a
git ref (the "before" of a change, built in the same invocation as the
"after") and a report's steps (a fused pair is one step)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def checkout(ref, tmp):
    """A source tree of `ref`: the path itself when it is a directory, else
    the commit extracted from this repository with git archive."""
    if os.path.isdir(ref):
        return os.path.abspath(ref)
    dest = os.path.join(tmp, "base")
    os.makedirs(dest)
    archive = subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", ref], capture_output=True)
    if archive.returncode != 0:
        sys.exit(f"--base {ref}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", dest], input=archive.stdout, check=True)
    return dest


def steps(rep, count):
    """The run's steps in order: (name, kind, MACs, count, layer names); a
    fused group's layers (report.json's fusion.groups) are one step whose
    kind names both ops, "pointwise+depthwise fused"."""
    group = {}
    for g in rep.get("fusion", {}).get("groups", []):
        for name in g["layers"]:
            group[name] = g["layers"]
    out, seen = [], set()
    for layer in rep["layers"]:
        if layer["name"] in seen:
            continue
        names = group.get(layer["name"], [layer["name"]])
        members = [l for l in rep["layers"] if l["name"] in names]
        seen.update(names)
        kind = "+".join(l["op"] for l in members) + (" fused" if len(members) > 1 else "")
        out.append(("+".join(names), kind, sum(l["macs"] for l in members), sum(l[count] for l in members),
                    tuple(names)))
    return out
