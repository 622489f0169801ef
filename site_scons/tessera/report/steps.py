"""Steps, not layers: what the firmware runs and measures as one unit.

A fused step (the fusion selector's group, schedule.json) runs all its
layers in its first layer's slot of the network's loop; the other layers'
slots only read the timer. So a count belongs to the step, and per-layer
figures of fused layers mean nothing on their own. These functions give a
report's steps and figures per kind of step from report.json's data, for
the report itself, `tessera diff` (report/diff.py) and the benchmarks:

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


# ---- report.json's steps, made by the report ----------------------------------

def tile_text(layer):
    """A layer's tile as the tables show it."""
    if layer.get("in_place"):
        return "in place"
    if not layer["tiled"]:
        return "whole"
    t = layer["tile"]
    text = f"{t['h']}x{t['w']}x{t['c']}"
    if layer.get("split"):
        # the reduction in chunks (tessera.tiler): {"k": input channels a chunk, "n": chunks}
        text += f", {layer['split']['n']} chunks of {layer['split']['k']} ch"
    return text


def _fused_tile(ft):
    """A fused step's tile: its bands (rows of the second layer's output,
    and channel blocks), or the add epilogue's producer's tile."""
    if ft.get("kind") == "add":
        t = ft["tiling"]
        return "whole" if not t["tiled"] else f"{t['tile']['h']}x{t['tile']['w']}x{t['tile']['c']}"
    if not ft.get("tiled", True) and len(ft.get("bands", [])) <= 1:
        return "whole"
    n = len(ft.get("bands", []))
    blocks = ft.get("blocks") or []
    return f"{n} band{'s' if n != 1 else ''} of {ft.get('band_h', '?')} rows" + (
        f", {len(blocks)} channel blocks" if len(blocks) > 1 else "")


def _patch_tile(p):
    """A patched step's tile: its patches of output pixels."""
    h, w = p["tile"]
    n = p["patches"]
    return f"{n} patch{'es' if n != 1 else ''} of {h}x{w}"


def make(out, graph, sched, fused, by_layer, meta, count_key):
    """report.json's steps from its layers (out["layers"], costs added),
    the schedule and the chosen steps' fused tilings: per step its layers,
    their sums, the step's measured count, its estimate (a fused step's
    from the fused cost model, tessera.fusion.costs; a patched step's the
    patch selector's, schedule.json) and time. Layers of a
    multi-layer step get `step` and lose the cost model's measured/error
    (their slot's count is not theirs alone)."""
    from . import timing

    entries = {l["name"]: (i, l) for i, l in enumerate(out["layers"])}
    plan = [s for s in (sched or {}).get("steps", [])] or [
        {"step": layer.name, "kind": "layer", "layers": [layer.name]} for layer in graph.layers]
    groups = [s for s in plan if len(s["layers"]) > 1]
    estimates = _group_estimates(graph, by_layer, {s["step"]: fused[s["step"]] for s in groups
                                                    if s["step"] in fused}, meta)
    rows = []
    for s in plan:
        members = [entries[n][1] for n in s["layers"]]
        first = members[0]
        row = {"step": s["step"], "kind": s["kind"], "ops": [m["op"] for m in members], "layers": list(s["layers"]),
               "index": entries[s["layers"][0]][0], "macs": sum(m["macs"] for m in members),
               "params": sum(m["params"] for m in members),
               "weight_bytes": sum(m["weight_bytes"] for m in members),
               "dma_bytes": {e: sum(m["dma_bytes"].get(e, 0) for m in members) for e in first["dma_bytes"]},
               "match": all(m["match"] for m in members)}
        if len(members) == 1:
            row.update(tile=tile_text(first), n_tiles=first["n_tiles"], l1_bytes=first["l1_bytes"],
                       l1_budget=first["l1_budget"])
            if first.get("in_place"):
                row["in_place"] = first["in_place"]
            est = first.get("cost", {}).get("estimate")
        elif s.get("patch"):
            # a patched step (fusion/patch.py): its patches, its tile-level bytes, the patch cost model's estimate
            p = s["patch"]
            row.update(tile=_patch_tile(p), n_tiles=p["patches"], l1_bytes=p["l1_bytes"]["total"],
                       l1_budget=first["l1_budget"])
            est = p.get("estimate")
        else:
            ft = fused.get(s["step"], {})
            row.update(tile=_fused_tile(ft), n_tiles=len(ft.get("bands", [])) or 1,
                       l1_bytes=ft.get("l1_bytes", {}).get("total"), l1_budget=first["l1_budget"])
            est = estimates.get(s["step"])
            for m in members:
                m["step"] = s["step"]
                for k in ("measured", "error"):
                    m.get("cost", {}).pop(k, None)
        if count_key and all(count_key in m for m in members):
            row[count_key] = sum(m[count_key] for m in members)
        if est is not None:
            row["estimate"] = est
            if row.get(count_key):
                row["error"] = round((est - row[count_key]) / row[count_key], 4)
        ms = timing.ms(row.get(count_key), out["counts"])
        if ms is not None:
            row["ms"] = ms
        rows.append(row)
    return rows


def _group_estimates(graph, tilings, fused, meta):
    """{group: estimate or None} of the fused steps, as min_latency's
    selector prices them (tessera.fusion.costs.model_costs)."""
    cost = meta.get("cost") or {}
    if not fused or cost.get("coefficients") is None:
        return {}
    from ..fusion.costs import model_costs

    view = dict(cost, kernels=meta.get("kernels"), target=meta["target"], unit=meta["counts"])
    return model_costs(graph, tilings, {g: (None, ft) for g, ft in fused.items()}, view)["groups"]


def make_totals(out, count_key, meta):
    """totals.steps: the steps' measured sum (the layers' slots summed:
    the run's total less its loop), their estimate and its error, and the
    time; totals.cost follows the steps (a fused step's estimate, not its
    layers' apart)."""
    from . import timing

    rows = out["steps"]
    tot = {"count": len(rows)}
    if count_key and all(count_key in r for r in rows):
        tot[count_key] = sum(r[count_key] for r in rows)
    if rows and all("estimate" in r for r in rows):
        tot["estimate"] = sum(r["estimate"] for r in rows)
        if tot.get(count_key):
            tot["error"] = round((tot["estimate"] - tot[count_key]) / tot[count_key], 4)
    ms = timing.ms(tot.get(count_key), out["counts"])
    if ms is not None:
        # the network's time: its steps (the run's total also spans the
        # harness's work between them, its printing on some targets)
        tot["ms"] = out["totals"]["ms"] = ms
    out["totals"]["steps"] = tot
    c = out["totals"].get("cost")
    if c is not None and "estimate" in tot:
        c.update(estimate=tot["estimate"])
        if tot.get(count_key):
            c.update(measured=tot[count_key], error=tot["error"])
