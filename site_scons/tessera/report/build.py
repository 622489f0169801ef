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

from ..codegen.libraries import library, split_kernel
from ..config.views import COUNT_KEYS
from ..planning.memplan import memory_report
from . import footprint, steps as stepping, summary, timing
from .costs import add_costs

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


def report(meta, graph, weights, the_plan, verdict, tilings, sched=None, fused=None, firmware=None, golden=None):
    """report.json's data. `sched`: schedule.json; `fused`: {group: its
    fused tiling}; `firmware`: {"elf": footprint.read_elf(...), "map":
    footprint.parse_map(...)} of the linked test firmware; `golden`: the
    graph outputs' golden values (the firmware's, bit for bit)."""
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
        if t.get("why"):
            entry["tile_reason"] = t["why"]
        if t.get("split"):
            # the reduction in chunks (tessera.tiler): {"k": input channels a chunk, "n": chunks}
            entry["split"] = t["split"]
        if layer.name in the_plan.get("direct", {}):
            # run in place (tessera.planning.inplace): no tiles, only its scratch in the tile level
            entry.update({"in_place": the_plan["direct"][layer.name], "n_tiles": 1,
                          "l1_bytes": the_plan["tiles"]["layers"][layer.name]["total"]})
        if meta.get("kernels"):
            entry.update(kernel_of(meta["kernels"], layer, graph, bool(t.get("split"))))
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
    memory = memory_report(the_plan, _declared_arena(the_plan, meta))
    acts = memory[the_plan["activations"]["level"]]
    # the plan's peak; the old figure (the largest layer's inputs and output,
    # which no plan of whole tensors beats) keeps its own name
    tot["tensor_bound_activation_bytes"] = tot.pop("peak_activation_bytes")
    tot["peak_activation_bytes"] = acts["peak"]
    out = {
        "target": meta["target"],
        "model": meta["model"],
        "verdict": verdict["verdict"],
        "counts": {"method": meta["counts"], "note": note, **timing.label(meta)},
        # which code the kernels were built as: the target's ISA extensions
        # switch their paths on (portable C otherwise)
        "kernels": {"library": meta.get("kernels", ""), "isa": list(meta.get("isa", [])),
                    "path": "+".join(meta.get("isa", [])) or "portable"},
        "totals": tot,
        "layers": layers,
        "memory": memory,
    }
    add_costs(out, meta, graph, tilings, count_key, the_plan)
    decision = in_place_decision(the_plan, graph, tilings, meta)
    if decision:
        out["in_place"] = decision
        for entry in layers:
            if entry["name"] in decision["layers"]:
                entry["in_place_reason"] = decision["layers"][entry["name"]]
    out["steps"] = stepping.make(out, graph, sched, fused or {}, by_layer, meta, count_key)
    stepping.make_totals(out, count_key, meta)
    if firmware is not None:
        out["firmware"] = firmware_footprint(meta, the_plan, firmware)
    outs = summary.outputs(graph, golden, _reference_tops(meta)) if golden is not None else None
    if outs:
        out["outputs"] = outs
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


POLICY_WHY = {
    "flat": "the tile level is RAM like the activations': each set of layers in place was planned and the one "
            "with the least total RAM taken (ties: more layers in place)",
    "ram_cap": "the tile level is faster RAM: layers run in place only where the ram_cap needs them "
               "(ram_budget.json)",
}


def in_place_decision(the_plan, graph, tilings, meta):
    """Why each layer that could run in place does or does not: the plan's
    options (memplan.json's in_place_decision: every set of layers in place
    it planned, with its total RAM) and, with a cost model, each eligible
    layer's estimate in place and tiled. None when no layer could."""
    made = the_plan.get("in_place_decision")
    if not made:
        return None
    chosen = dict(the_plan.get("direct", {}))
    options = []
    for o in made["options"]:
        options.append(dict(o, in_place=sorted(o["in_place"]), chosen=o["in_place"] == chosen and "ram" in o))
    coefs = (meta.get("cost") or {}).get("coefficients")
    by_layer = {t["layer"]: t for t in tilings}
    rows = {}
    for name, kind in made["eligible"].items():
        est = ""
        if coefs is not None:
            from ..cost import features, model

            layer = graph.layer(name)
            t = by_layer[name]
            base = features.layer_features(layer, graph, t, meta["cost"].get("dims", 2), meta["cost"].get("cores", 1))
            direct = {**{k: v for k, v in chosen.items() if k != name}}
            tiled = dict(base, **features.plan_features(graph, dict(the_plan, direct=direct)).get(name, {}))
            placed = dict(base, **features.plan_features(graph, dict(the_plan, direct=dict(direct, **{name: kind})))
                          .get(name, {}))
            est = (f"; estimated {model.estimate(coefs, layer.op, placed, t.get('buffering', 2)):,} in place, "
                   f"{model.estimate(coefs, layer.op, tiled, t.get('buffering', 2)):,} tiled")
        rams = {tuple(o["in_place"]): o.get("ram") for o in options}
        if name in chosen:
            why = f"in place ({chosen[name]})"
            alt = rams.get(tuple(sorted(n for n in chosen if n != name)))
        else:
            why = f"tiled, though it could run in place ({kind})"
            alt = rams.get(tuple(sorted(list(chosen) + [name])))
        mine = next((o.get("ram") for o in options if o["chosen"]), None)
        if alt is not None and mine is not None:
            why += f": the plan with it {'tiled' if name in chosen else 'in place'} took {alt:,} B of RAM against {mine:,} B"
        rows[name] = why + est
    return {"policy": made["policy"], "why": POLICY_WHY.get(made["policy"], made["policy"]),
            "options": options, "layers": rows}


def _reference_tops(meta):
    """(who, {output tensor: its top [[index, value]]}) of the reference
    runtime that checked the golden model on the same input."""
    if (meta.get("tflite") or {}).get("outputs"):
        return "the TFLite interpreter", {o["tensor"]: o["top"] for o in meta["tflite"]["outputs"]}
    if (meta.get("ort_check") or {}).get("outputs"):
        return "ONNX Runtime", {o["tensor"]: o["top"] for o in meta["ort_check"]["outputs"]}
    return None, {}


def firmware_footprint(meta, the_plan, firmware):
    """report.json's `firmware`: every byte of the linked test firmware per
    level (report.footprint), with the arrays the plan declared."""
    from ..codegen.network import declared_arrays

    storage = meta.get("storage") or {}
    spill = the_plan["activations"].get("spill")
    window = bool(spill and storage and spill["level"] == storage.get("level"))
    declared = declared_arrays(the_plan, meta["prefix"], _declared_arena(the_plan, meta) or 0, window)
    levels = {n: lvl for n, lvl in (meta.get("levels") or {}).items()
              if lvl["kind"] != "storage" and lvl.get("address") is not None}     # a native program: none
    fp = footprint.footprint(firmware["elf"], firmware["map"], levels, meta["prefix"], declared)
    fp["file"] = firmware.get("name", "firmware.elf")
    if firmware.get("stacks"):
        # each stack's deepest call chain against its share (the link checked it)
        fp["stacks"] = [{"who": r["who"], "need": r["need"], "bytes": r["bytes"], "field": firmware["stacks"]["field"]}
                        for r in firmware["stacks"]["stacks"]]
    return fp


def kernel_of(kernels, layer, graph, split=False):
    """{kernel, library}: the function the generated code calls for the
    layer and the library it belongs to (the reference kernels when the
    target's library gave the layer to its fallback); `split`: the step
    of a split reduction (codegen/split.py)."""
    lib = library(kernels)
    if split:
        fn = split_kernel(lib, layer, graph)
        return {"kernel": fn, "library": "reference" if fn == "tsr_split_step" else kernels}
    fn = lib.kernel_function(layer, graph)
    own = ([fn for table in ("KERNELS", "RQ_KERNELS", "TFL_KERNELS") for fn in getattr(lib, table, {}).values()]
           + list(getattr(lib, "RECURRENT", ())) + [getattr(lib, "ONNX_RECURRENT", None)])
    return {"kernel": fn, "library": kernels if fn in own else "reference"}


def core_split(counts):
    """Per-core counts and how evenly they split: max core / mean core (1.0
    is a perfect split)."""
    mean = sum(counts) / len(counts) if counts else 0
    return {"core_counts": list(counts),
            "work_split": round(max(counts) / mean, 4) if mean else None}
