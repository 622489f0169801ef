"""report.json of a built and checked network, and its rich rendering.

Keys: target, model, verdict, counts (what the per-layer numbers measure),
totals, layers (name, op, shapes, macs, tile, n_tiles, l1_bytes, l1_budget,
dma_bytes per engine, and instructions/cycles when the runner counts
them), memory (per level: peak, lower_bound, size).
"""

from ..memplan import memory_report
from . import summary
from .console import make_console

COUNT_KEYS = {"qemu-instructions": "instructions", "gvsoc-cycles": "cycles", "host-ns": "host_ns"}
COUNT_NOTES = {
    "qemu-instructions": "instructions executed under QEMU (-icount shift=0); not silicon cycles",
    "gvsoc-cycles": "cycles simulated by GVSoC",
    "host-ns": "host wall time in ns (noisy, not deterministic)",
    "none": "not counted on this runner",
}


def report(meta, graph, weights, the_plan, verdict, tilings):
    rows = summary.layer_rows(graph, weights)
    tot = summary.totals(rows)
    count_key = COUNT_KEYS.get(meta["counts"])
    engines = meta["dma"]
    by_layer = {t["layer"]: t for t in tilings}
    layers = []
    for i, (row, layer) in enumerate(zip(rows, graph.layers)):
        t = by_layer[layer.name]
        entry = dict(row)
        entry.update({
            "tiled": t["tiled"],
            "tile": t["tile"],
            "n_tiles": t["n_tiles"]["h"] * t["n_tiles"]["w"] * t["n_tiles"]["c"],
            "l1_bytes": t["l1_bytes"]["total"],
            "l1_budget": t["l1_budget"],
            "tiling_optimal": t["optimal"],
            "match": verdict["layers"][i]["match"],
        })
        dma = verdict["dma"][i] if i < len(verdict.get("dma", [])) else []
        entry["dma_bytes"] = {engines[e]: b for e, b in enumerate(dma) if e < len(engines)}
        if count_key and i < len(verdict.get("counts", [])):
            entry[count_key] = verdict["counts"][i]
        layers.append(entry)
    if count_key and verdict.get("total_count") is not None:
        tot[count_key] = verdict["total_count"]
    tot["dma_bytes"] = {name: sum(l["dma_bytes"].get(name, 0) for l in layers) for name in engines}
    return {
        "target": meta["target"],
        "model": meta["model"],
        "verdict": verdict["verdict"],
        "counts": {"method": meta["counts"], "note": COUNT_NOTES.get(meta["counts"], "")},
        "totals": tot,
        "layers": layers,
        "memory": memory_report(the_plan),
    }


def render(data, console=None):
    from rich.table import Table

    console = console or make_console()
    count_key = COUNT_KEYS.get(data["counts"]["method"])
    engines = list(data["totals"]["dma_bytes"])
    table = Table(title=f"{data['model']} on {data['target']}: {data['verdict'].upper()}")
    for col in ("#", "layer", "op", "output", "MACs", "tile (h x w x c)", "tiles", "L1 bytes"):
        table.add_column(col, justify="right" if col not in ("layer", "op") else "left")
    for name in engines:
        table.add_column(f"DMA {name}", justify="right")
    if count_key:
        table.add_column(count_key, justify="right")
    table.add_column("bit-exact")
    for i, l in enumerate(data["layers"]):
        tile = "whole" if not l["tiled"] else f"{l['tile']['h']}x{l['tile']['w']}x{l['tile']['c']}"
        cells = [str(i), l["name"], l["op"], "x".join(map(str, l["out_shape"])), str(l["macs"]), tile,
                 str(l["n_tiles"]), f"{l['l1_bytes']}/{l['l1_budget']}"]
        cells += [str(l["dma_bytes"].get(n, 0)) for n in engines]
        if count_key:
            cells.append(str(l.get(count_key, "")))
        cells.append("yes" if l["match"] else "[red]NO[/red]")
        table.add_row(*cells)
    console.print(table)
    mem = Table(title="memory plan")
    for col in ("level", "holds", "peak", "lower bound", "usable", "size"):
        mem.add_column(col, justify="right" if col not in ("level", "holds") else "left")
    for level, m in data["memory"].items():
        mem.add_row(level, m["holds"], str(m["peak"]), str(m["lower_bound"]), str(m["usable"]), str(m["size"]))
    console.print(mem)
    tot = data["totals"]
    line = f"total: {tot['macs']} MACs, {tot['params']} parameters"
    if count_key and count_key in tot:
        line += f", {tot[count_key]} {count_key} ({data['counts']['note']})"
    console.print(line)
