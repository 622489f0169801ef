"""A sweep's results for a person: one table of every point (CSV and JSON),
the Pareto front of latency against RAM per model, and the smallest memory
sizes that reach a latency, per model and for all models together."""

import csv
import io

from . import spec as sweep_spec

# levels off the chip: their own columns, outside ram_total (a chip team
# sizes the on-chip memories; an activation spilled to HyperRAM is not one)
OFF_CHIP = ("external", "storage")

LEVEL_ORDER = ("L1", "L2", "L3", "sram", "flash")


def _levels(results):
    seen = {lvl for r in results for lvl in (r.get("ram") or {})}
    return sorted(seen, key=lambda l: (LEVEL_ORDER.index(l) if l in LEVEL_ORDER else 99, l))


def _kinds(point):
    memory = sweep_spec.read_yaml(point["target_path"]).get("memory") or {}
    return {lvl: (m or {}).get("kind") for lvl, m in memory.items()}


def table(spec, points, results):
    """One row per point (the points' order): the model, target, each axis
    value, then the totals: `ram_total` is the on-chip RAM (the levels
    written at run time, with their reservations, less external and storage
    ones). Only what a build determines (no wall time), so the same sweep
    gives the same table wherever it ran."""
    levels = _levels(results)
    rows = []
    kinds = {}
    for p, r in zip(points, results):
        if p["target_path"] not in kinds:
            kinds[p["target_path"]] = _kinds(p)
        kind = kinds[p["target_path"]]
        row = {"model": p["model"], "target": p["target"]}
        over = dict(p["overrides"])
        for axis in spec["axes"]:
            row[axis["key"]] = over.get(axis["key"]) if axis["kind"] == "target" else p["variables"].get(axis["key"])
        row.update({"status": r.get("status"), "verdict": r.get("verdict"), "count": r.get("count"),
                    "latency": r.get("latency"), "estimate": r.get("estimate"),
                    "estimate_error": r.get("estimate_error")})
        err = r.get("estimate_error")
        row["estimate_off"] = None if err is None else abs(err) > spec["tolerance"]
        for lvl in levels:
            row[f"ram_{lvl}"] = (r.get("ram") or {}).get(lvl)
        ram = r.get("ram") or {}
        onchip = [v for lvl, v in ram.items() if v is not None and kind.get(lvl) not in OFF_CHIP]
        row.update({"ram_total": sum(onchip) if onchip else None, "flash": r.get("flash"),
                    "peak_activation_bytes": r.get("peak_activation_bytes"), "error": r.get("error")})
        rows.append(row)
    return rows


def csv_text(rows):
    if not rows:
        return ""
    f = io.StringIO()
    w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: "" if v is None else v for k, v in row.items()})
    return f.getvalue()


def latency(row):
    """The measured count; without a run (--estimate) the cost model's."""
    return row["latency"] if row["latency"] is not None else row["estimate"]


def _ok(row):
    return row["status"] == "ok" and latency(row) is not None and row["ram_total"] is not None


def pareto(rows):
    """Per model, the points no other point beats on both RAM and latency
    (less or equal on both, less on one), by RAM ascending."""
    front = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = sorted((r for r in rows if r["model"] == model and _ok(r)),
                      key=lambda r: (r["ram_total"], latency(r)))
        best, keep = None, []
        for r in mine:
            if best is None or latency(r) < best:
                keep.append(r)
                best = latency(r)
        front[model] = keep
    return front


def _memory_axes(spec):
    return [a["key"] for a in spec["axes"] if a["kind"] == "target" and a["key"].startswith("memory.")
            and a["key"].endswith(".size")]


def _config_key(spec, row):
    return tuple((a["key"], row[a["key"]]) for a in spec["axes"])


def _size(spec, row):
    """What "smaller" means: the swept memory sizes' sum, else the RAM used."""
    axes = _memory_axes(spec)
    return sum(row[k] for k in axes) if axes else row["ram_total"]


def smallest(spec, rows, limit=None):
    """The smallest memories reaching `latency` (instructions or cycles; the
    sweep file's `latency:` by default): per model the configuration of the
    least memory (the swept memory sizes' sum, else the RAM used) whose
    latency is at most that, and the least one that all models reach. None
    when no latency is given."""
    limit = limit if limit is not None else spec.get("latency")
    if limit is None:
        return None
    out = {"latency": limit, "measure": " + ".join(_memory_axes(spec)) or "ram_total", "models": {}}
    configs = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        fits = [r for r in rows if r["model"] == model and _ok(r) and latency(r) <= limit]
        best = min(fits, key=lambda r: (_size(spec, r), latency(r)), default=None)
        out["models"][model] = None if best is None else _answer(spec, best)
        for r in fits:
            configs.setdefault(_config_key(spec, r), []).append(r)
    models = list(out["models"])
    together = [(k, rs) for k, rs in configs.items() if {r["model"] for r in rs} == set(models)]
    if together:
        key, rs = min(together, key=lambda kr: (max(_size(spec, r) for r in kr[1]), kr[0]))
        out["all"] = {"config": dict(key), "latency": {r["model"]: latency(r) for r in rs},
                      "ram_total": {r["model"]: r["ram_total"] for r in rs}}
    else:
        out["all"] = None
    return out


def _answer(spec, row):
    return {"config": {a["key"]: row[a["key"]] for a in spec["axes"]}, "latency": latency(row),
            "ram_total": row["ram_total"]}
