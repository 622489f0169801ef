"""report.json of a built and checked network, and its rich rendering.

Keys: target, model, verdict, counts (what the per-layer numbers measure),
totals, layers (name, op, shapes, macs, tile, n_tiles, l1_bytes, l1_budget,
dma_bytes per engine, and instructions/cycles when the runner counts
them; where the run printed per-core counts (a run asked for them, see
the GAP8 harness's `cores` argument): core_counts (each compute core's
share), work_split (max core / mean core) and dma_copy_count (the part of
the layer's count spent in emulated DMA copies); where weights stream from
a slower level: weights_streamed), memory (per level: peak, lower_bound
(with the planned overlaps), tensor_bound (whole tensors), size, and for
levels written at run time reserved and ram = peak + reserved, or, where
a storage target's firmware declares a larger activation arena (the
program's pools in its free bytes: pools = declared - peak; or the in-order
weight stream's end), declared and ram = declared + reserved); per layer also the kernel function that ran it and its library
(`kernel`, `library`: the target's, or the fallback's when the adapter
gave the layer to it); for a model with `reference:`, reference (kind, folder, verdict,
what was compared, and each compared file or output: equal, or the first
differing element) and per layer reference_match where the reference has
the layer's output (DORY); for a .tflite model, tflite (the interpreter
and kernels that checked the golden model, tensors compared, every one
equal); per layer and in totals, `cost`: the cost model's estimate next to
the measured count (report/costs.py), labeled in counts.cost.
"""

from ..codegen.libraries import library
from ..config.views import COUNT_KEYS
from ..planning.memplan import memory_report
from . import summary
from .costs import add_costs
from .console import make_console

COUNT_NOTES = {
    "qemu-instructions": "instructions executed under QEMU (-icount shift=0); not silicon cycles",
    "gvsoc-cycles": "cycles simulated by GVSoC",
    "host-ns": "host wall time in ns (noisy, not deterministic)",
    "none": "not counted on this runner",
}


def _stream_source(the_plan):
    """Where streamed weights come from: the weight level, or the storage
    level for the layers the plan put there (docs/out_of_core.md)."""
    stored = the_plan["weights"].get("storage")
    return stored["level"] if stored else the_plan["weights"]["level"]


def _spill_traffic(graph, the_plan, by_layer, meta):
    """Per layer, the activation bytes its tiles move to and from the spill
    level (GAP8's L3: boxes of the tensors moved there, as codegen/layer.py
    moves them), or None for a layer that touches none; None without a
    spill level, or when it is a storage level (out_of_core has that)."""
    spill = the_plan["activations"].get("spill")
    if not spill or spill["level"] == (meta.get("storage") or {}).get("level"):
        return None
    from ..storage.ooc import layer_io

    # a layer with two-slot bounce buffers overlaps these moves with its tiles
    two = {name.split(":bounce:")[0] for name in spill.get("slots", {})}
    out = []
    for io in layer_io(graph, the_plan, by_layer, {"level": spill["level"]}):
        touched = io["reads"] or io["writes"]
        out.append({"level": spill["level"], "read_bytes": io["read"], "written_bytes": io["written"],
                    "reads": io["reads"], "writes": io["writes"], "asynchronous": io["name"] in two}
                   if touched else None)
    return out


def _declared_arena(the_plan, meta):
    """On a target with a storage level, the activation arena network.c
    declares at least (tessera.storage.firmware.declared_arena: the usable
    bytes when the program's pools take the free ones, else 0); None
    elsewhere (the report counts the plan's peak)."""
    if not meta.get("storage"):
        return None
    from ..storage import firmware
    return firmware.declared_arena(the_plan) or 0


def report(meta, graph, weights, the_plan, verdict, tilings):
    rows = summary.layer_rows(graph, weights)
    tot = summary.totals(rows)
    count_key = COUNT_KEYS.get(meta["counts"])
    engines = meta["dma"]
    by_layer = {t["layer"]: t for t in tilings}
    stream = the_plan["weights"].get("stream")
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
        if layer.name in the_plan.get("direct", {}):
            # run in place (tessera.planning.inplace): no tiles, only its scratch in the tile level
            entry.update({"in_place": the_plan["direct"][layer.name], "n_tiles": 1,
                          "l1_bytes": the_plan["tiles"]["layers"][layer.name]["total"]})
        if meta.get("kernels"):
            entry.update(kernel_of(meta["kernels"], layer, graph))
        dma = verdict["dma"][i] if i < len(verdict.get("dma", [])) else []
        entry["dma_bytes"] = {engines[e]: b for e, b in enumerate(dma) if e < len(engines)}
        if count_key and i < len(verdict.get("counts", [])):
            entry[count_key] = verdict["counts"][i]
        if i < len(verdict.get("cores", [])):
            entry.update(core_split(verdict["cores"][i]))
            entry["dma_copy_count"] = verdict["dma_counts"][i]
        if stream is not None and layer.name in stream["layers"]:
            mine = stream["layers"][layer.name]
            entry["weights_streamed"] = {"from": _stream_source(the_plan), "bytes": mine["bytes"],
                                         "chunks": mine["count"], "chunk_channels": mine["chunk_c"]}
        layers.append(entry)
    traffic = _spill_traffic(graph, the_plan, by_layer, meta)
    for entry, mine in zip(layers, traffic or ()):
        if mine is not None:
            entry["spill_traffic"] = mine
    if traffic:
        mine = [m for m in traffic if m is not None]
        tot["spill_traffic"] = {"level": mine[0]["level"], "layers": len(mine),
                                **{k: sum(m[k] for m in mine) for k in ("read_bytes", "written_bytes",
                                                                        "reads", "writes")},
                                "asynchronous_layers": sum(m["asynchronous"] for m in mine)}
    if count_key and verdict.get("total_count") is not None:
        tot[count_key] = verdict["total_count"]
    tot["dma_bytes"] = {name: sum(l["dma_bytes"].get(name, 0) for l in layers) for name in engines}
    if "cores" in verdict:
        tot.update(core_split([sum(c) for c in zip(*verdict["cores"])]))
        tot["dma_copy_count"] = sum(verdict["dma_counts"])
        tot["core_count_overlaps"] = verdict.get("core_overlaps", 0)
    if stream is not None:
        tot["weights_streamed"] = {"from": _stream_source(the_plan), "through": stream["level"],
                                   "bytes": sum(m["bytes"] for m in stream["layers"].values()),
                                   "chunks": len(stream["chunks"])}
    note = COUNT_NOTES.get(meta["counts"], "")
    if meta.get("counts_note"):
        note += "; " + meta["counts_note"]
    out = {
        "target": meta["target"],
        "model": meta["model"],
        "verdict": verdict["verdict"],
        "counts": {"method": meta["counts"], "note": note},
        # which code the kernels were built as: the target's ISA extensions
        # switch their paths on (portable C otherwise)
        "kernels": {"library": meta.get("kernels", ""), "isa": list(meta.get("isa", [])),
                    "path": "+".join(meta.get("isa", [])) or "portable"},
        "totals": tot,
        "layers": layers,
        "memory": memory_report(the_plan, _declared_arena(the_plan, meta)),
    }
    add_costs(out, meta, graph, tilings, count_key, the_plan)
    if verdict.get("first_mismatch"):
        out["first_mismatch"] = verdict["first_mismatch"]
    if meta.get("tflite"):
        out["tflite"] = meta["tflite"]
    if meta.get("ort_check") is not None:
        out["ort_check"] = meta["ort_check"]
    intake = summary.intake(graph)
    if intake:
        out["intake"] = intake
    ref = verdict.get("reference")
    if ref is not None:
        out["verdict_golden"] = verdict.get("golden", verdict["verdict"])
        out["reference"] = ref
        by_layer = {r["layer"]: r["equal"] for r in ref["compared"]
                    if r.get("layer") and "equal" in r and ref["kind"] == "dory"}
        for entry in layers:
            if entry["name"] in by_layer:
                entry["reference_match"] = by_layer[entry["name"]]
    return out


def kernel_of(kernels, layer, graph):
    """{kernel, library}: the function the generated code calls for the
    layer and the library it belongs to (the reference kernels when the
    target's library gave the layer to its fallback)."""
    lib = library(kernels)
    fn = lib.kernel_function(layer, graph)
    own = list(getattr(lib, "KERNELS", {}).values()) + list(getattr(lib, "RQ_KERNELS", {}).values())
    return {"kernel": fn, "library": kernels if fn in own else "reference"}


def core_split(counts):
    """Per-core counts and how evenly they split: max core / mean core (1.0
    is a perfect split)."""
    mean = sum(counts) / len(counts) if counts else 0
    return {"core_counts": list(counts),
            "work_split": round(max(counts) / mean, 4) if mean else None}


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
    estimated = any("estimate" in l.get("cost", {}) for l in data["layers"])
    if estimated:
        table.add_column("estimate", justify="right")
    split = any("work_split" in l for l in data["layers"])
    if split:
        table.add_column("max/mean core", justify="right")
    table.add_column("bit-exact")
    by_ref = any("reference_match" in l for l in data["layers"])
    if by_ref:
        table.add_column(f"= {data['reference']['kind']}")
    for i, l in enumerate(data["layers"]):
        tile = ("in place" if l.get("in_place") else "whole" if not l["tiled"]
                else f"{l['tile']['h']}x{l['tile']['w']}x{l['tile']['c']}")
        cells = [str(i), l["name"], l["op"], "x".join(map(str, l["out_shape"])), str(l["macs"]), tile,
                 str(l["n_tiles"]), f"{l['l1_bytes']}/{l['l1_budget']}"]
        cells += [str(l["dma_bytes"].get(n, 0)) for n in engines]
        if count_key:
            cells.append(str(l.get(count_key, "")))
        if estimated:
            c = l.get("cost", {})
            err = f" ({100 * c['error']:+.0f}%)" if c.get("error") is not None else ""
            cells.append(f"{c.get('estimate', '')}{err}")
        if split:
            cells.append(f"{l['work_split']:.2f}" if l.get("work_split") else "")
        cells.append("yes" if l["match"] else "[red]NO[/red]")
        if by_ref:
            cells.append("" if "reference_match" not in l else "yes" if l["reference_match"] else "[red]NO[/red]")
        table.add_row(*cells)
    console.print(table)
    mem = Table(title="memory plan")
    for col in ("level", "holds", "peak", "lower bound", "tensor bound", "usable", "size"):
        mem.add_column(col, justify="right" if col not in ("level", "holds") else "left")
    for level, m in data["memory"].items():
        mem.add_row(level, m["holds"], str(m["peak"]), str(m["lower_bound"]), str(m.get("tensor_bound", "")),
                    str(m["usable"]), str(m["size"]))
    console.print(mem)
    ram = {level: m["ram"] for level, m in data["memory"].items() if "ram" in m}
    if ram:
        def parts(m):
            held = ", ".join(f"{k} {v}" for k, v in m.get("reserved_for", {}).items())
            fw = (data.get("out_of_core") or {}).get("firmware") or {}
            use = ("unused by the in-order firmware" if fw.get("program") in (None, "in order")
                   else f"the storage program's pools take up to {sum(fw.get('pools', {}).values())} per phase "
                        "in the arena's free bytes")
            if "pools" not in m:
                use = "the weight stream's chunk buffers"
            pools = (f" + {m['declared'] - m['peak']} past it ({use}) = the declared arena {m['declared']}"
                     if "declared" in m else "")
            return f" ({m['holds']} {m['peak']}{pools}" + (f"; {held}" if held else "") + ")"
        console.print("RAM: " + " + ".join(f"{level} {n}{parts(data['memory'][level])}" for level, n in ram.items())
                      + f" = {sum(ram.values())} bytes (what the firmware declares: the planned peak, or the "
                        "declared arena, plus the target's reserved bytes per level)")
    tot = data["totals"]
    line = f"total: {tot['macs']} MACs, {tot['params']} parameters"
    if count_key and count_key in tot:
        line += f", {tot[count_key]} {count_key} ({data['counts']['note']})"
    if tot.get("cost", {}).get("estimate") is not None:
        c = tot["cost"]
        line += f"; cost model estimate {c['estimate']}"
        if c.get("error") is not None:
            line += f" ({100 * c['error']:+.1f}% of the layers' measured sum)"
    ws = tot.get("weights_streamed")
    if ws:
        line += (f"; {ws['bytes']} bytes of weights streamed from {ws['from']} through {ws['through']} "
                 f"in {ws['chunks']} chunks")
    st = tot.get("spill_traffic")
    if st:
        line += (f"; activations moved to {st['level']}: {st['read_bytes']} bytes read and {st['written_bytes']} "
                 f"written by {st['layers']} layers ({st['asynchronous_layers']} double-buffered)")
    console.print(line)
    ooc = data.get("out_of_core")
    if ooc:
        t = ooc["totals"]
        text = (f"out of core ({ooc['level']}): {t['read_bytes']} B read in {t['reads']} transfers, "
                f"{t['written_bytes']} B written in {t['writes']}; {t['io_bound_layers']} IO-bound layers; "
                f"compute {t['compute_ms']} ms, IO {t['io_ms']} ms")
        s = ooc.get("schedule")
        if s and "skipped" in s:
            text += f"; not scheduled: {s['skipped']}"
        elif s:
            text += (f"; scheduled {s['latency_ms']} ms per frame = {s['latency_vs_unlimited']}x unlimited SRAM, "
                     f"{s['throughput_fps']} frames/s over {s['frames']} (unlimited {s['unlimited_fps']})")
        console.print(text)
        if ooc.get("firmware"):
            console.print(f"firmware: {firmware_line(ooc['firmware'])}")
    if "kernels" in data:
        console.print(f"kernels: {data['kernels']['library']}, {data['kernels']['path']} code path")
    ref = data.get("reference")
    if ref is not None:
        bad = [r for r in ref["compared"] if not r.get("equal", True)]
        text = (f"{ref['kind']} reference {ref['reference']}: {ref['verdict'].upper()} "
                f"({len(ref['compared']) - len(bad)} of {len(ref['compared'])} equal; {ref['compared_by']})")
        console.print(text if not bad else f"[red]{text}[/red]")


def firmware_line(fw):
    """Which program the out-of-core firmware runs, in one line (the console
    and report.html)."""
    if fw["program"] == "in order":
        return f"the in-order program ({fw['why']})"
    return (f"the scheduler's program {fw['program']} ({fw['ops']['ops']} ops), estimated {fw['estimate_ms']} ms "
            f"per frame = {fw['estimate_vs_unlimited']}x unlimited SRAM; in order {fw['in_order_ms']} ms")
