"""Steps, not layers: what the firmware runs and measures as one unit.

A fused step (the fusion selector's group, schedule.json) runs all its
layers in its first layer's slot of the network's loop; the other layers'
slots only read the timer. So a count belongs to the step, and per-layer
figures of fused layers mean nothing on their own. These functions give a
report's steps and figures per kind of step from report.json's data, for
the report itself, tools/report_diff.py and the benchmarks:

    from tessera.report.steps import steps, by_kind
    rep = json.load(open("generated/stm32h7/mbv1_025_128/report.json"))
    for kind, row in by_kind(rep).items():      # "depthwise+pointwise" apart from "depthwise"
        print(kind, row["steps"], row["macs"], row["count"])

A step's kind is its layers' ops joined by "+": a single layer's kind is
its op, so fused and unfused figures never mix.
"""

from ..config.views import COUNT_KEYS


def count_key(report):
    """The key of the measured count in the report's layers and steps
    ("instructions", "cycles", ...), or None when the runner counts nothing."""
    return COUNT_KEYS.get(report["counts"]["method"])


def kind_of(ops):
    """A step's kind: its layers' ops joined by "+"."""
    return "+".join(ops)


def steps(report):
    """The report's steps in run order, each a dict with at least `step`
    (its name), `kind` ("layer" or the fused scheme), `ops`, `layers`,
    `macs` and, where the runner counts, the count under count_key(report):
    the sum of its layers' slots, so the steps' sum is the layers' sum.
    report.json has them (`steps`) since issue 31; older reports get them
    from their layers and fusion.groups."""
    if "steps" in report:
        return report["steps"]
    key = count_key(report)
    group = {n: g for g in report.get("fusion", {}).get("groups", []) for n in g["layers"]}
    by_name = {l["name"]: l for l in report["layers"]}
    out, seen = [], set()
    for layer in report["layers"]:
        if layer["name"] in seen:
            continue
        g = group.get(layer["name"])
        names = list(g["layers"]) if g else [layer["name"]]
        seen.update(names)
        members = [by_name[n] for n in names]
        step = {"step": g["step"] if g else layer["name"], "kind": "fused" if g else "layer",
                "ops": [l["op"] for l in members], "layers": names, "macs": sum(l["macs"] for l in members)}
        if key and all(key in l for l in members):
            step[key] = sum(l[key] for l in members)
        out.append(step)
    return out


def by_kind(report, key=None):
    """{kind: {"steps", "layers", "macs", "count"}} over the report's steps,
    kinds in order of first appearance; `count` is None where a step of the
    kind has no count. `key`: the count to sum (default: the runner's)."""
    key = key or count_key(report)
    out = {}
    for s in steps(report):
        row = out.setdefault(kind_of(s["ops"]), {"steps": 0, "layers": 0, "macs": 0, "count": 0})
        row["steps"] += 1
        row["layers"] += len(s["layers"])
        row["macs"] += s["macs"]
        if row["count"] is not None:
            row["count"] = row["count"] + s[key] if key and s.get(key) is not None else None
    return out
