"""Out-of-core accounting (docs/out_of_core.md): what every layer moves
between SRAM and the storage level, as the generated code moves it, and
the IO/compute problem the scheduler (tessera.storage.schedule) takes.

    io = layer_io(graph, the_plan, tilings, storage)
        per layer: its storage transfers, each (offset, bytes), by kind
        (weight chunks, input boxes of swapped tensors, output boxes)
    p = problem(graph, io, compute, storage)      # the scheduler's input
    s = summary(graph, io, compute, storage)      # report.json's out_of_core

A box of an HWC tensor on the card is one transfer when it covers whole
rows of every channel, a transfer per row when it covers every channel,
else a transfer per pixel (a channel slice goes through a band of its
rows instead: read and written back per tile, or, with the tiles walked
row band first, gathered in SRAM and written once): the storage driver merges only what is
contiguous on the card (kernels/hal/cortexm/storage.c). Costs: a transfer
takes the level's latency plus its whole blocks at the level's bandwidth.
"""

import math

from .. import ir
from ..errors import TesseraError
from ..tiler import tiles as tile_list
from ..tiles.geometry import box_transfers, rows_first
from ..config.views import is_whole, tiler_layer


def layer_io(graph, the_plan, tilings, storage):
    """Per layer (network order): {"name", "tiles": [{"reads": [{key, kind,
    segments}], "write": segments}], "read", "written", "reads", "writes"}.
    tilings: layer name -> tiling."""
    level = storage["level"]
    spill = the_plan["activations"].get("spill")
    swapped = spill["offsets"] if spill and spill["level"] == level else {}
    bands = set(spill.get("bands", ())) if swapped else set()
    stored = the_plan["weights"].get("storage", {"layers": {}})["layers"]
    stream = the_plan["weights"].get("stream")
    chunks = {}
    for k, chunk in enumerate(stream["chunks"] if stream and stored else []):
        if chunk["layer"] in stored:
            chunks.setdefault(chunk["layer"], []).append((k, chunk))
    out = []
    for layer in graph.layers:
        tiling = tilings[layer.name]
        view = tiler_layer(layer, graph)
        whole = is_whole(layer, graph)
        tiles = [] if whole else list(tile_list(view, tiling))
        if not tiles:
            tiles = [None]
        y = graph.tensor(layer.output)
        rows = []
        by_c0 = {c["c0"]: (k, c) for k, c in chunks.get(layer.name, [])}
        # constants on the card outside the stream (a layer walked row band
        # first): each new channel tile's rows, straight from the card
        direct = layer.name in stored and layer.name not in chunks and "split" not in stored[layer.name]
        last_band = {}
        for t in tiles:
            reads, held = [], []
            if t is not None and t["oc0"] in by_c0 and (not rows or rows[-1]["oc0"] != t["oc0"]):
                k, c = by_c0[t["oc0"]]
                reads.append({"key": f"w:{k}", "kind": "weights", "region": f"w:{layer.name}",
                              "segments": _chunk_segments(layer, graph, c, stored[layer.name])})
            elif direct and t is not None and (not rows or rows[-1]["oc0"] != t["oc0"]):
                reads.append({"key": f"w:{layer.name}:{len(rows)}", "kind": "weights", "region": f"w:{layer.name}",
                              "segments": _chunk_segments(layer, graph, {"c0": t["oc0"], "n": t["oc"]},
                                                          stored[layer.name])})
            for i, name in enumerate(layer.inputs):
                if name in swapped and t is not None and f"{layer.name}:bounce:in{i}" in bands:
                    # a storage-level tile of the input: its row band, every
                    # channel, read when the band changes, held by its tiles
                    x = graph.tensor(name)
                    row = x.shape[1] * x.shape[2] * ir.DTYPES[x.dtype]
                    read = {"key": f"in:{layer.name}:{len(rows)}:{i}", "kind": "input", "region": f"a:{name}",
                            "segments": [(swapped[name] + t["ih0"] * row, t["ih"] * row)]}
                    (reads if last_band.get(i) != (t["ih0"], t["ih"]) else held).append(read)
                    last_band[i] = (t["ih0"], t["ih"])
                elif name in swapped and t is not None:
                    x = graph.tensor(name)
                    reads.append({"key": f"in:{layer.name}:{len(rows)}:{i}", "kind": "input", "region": f"a:{name}",
                                  "segments": box_transfers(swapped[name], x.shape, ir.DTYPES[x.dtype], t["ih0"], t["ih"],
                                                   t["iw0"], t["iw"], t["ic0"], t["ic"])})
            write = []
            band_out = layer.output in swapped and t is not None and f"{layer.name}:bounce:out" in bands
            gathered = 0
            if band_out and (rows_first(tiling) or tiling["tile"]["c"] >= y.shape[2]):
                # a storage-level tile: the band gathered in SRAM (each tile holds
                # it: one band buffer), written once after its last tile
                row = y.shape[1] * y.shape[2] * ir.DTYPES[y.dtype]
                gathered = t["oh"] * row
                if t is tiles[-1] or tiles[t["index"] + 1]["oh0"] != t["oh0"]:
                    write = [(swapped[layer.output] + t["oh0"] * row, gathered)]
            elif band_out:
                # a channel slice through a band of its rows: read, then written back
                row = y.shape[1] * y.shape[2] * ir.DTYPES[y.dtype]
                band = (swapped[layer.output] + t["oh0"] * row, t["oh"] * row)
                reads.append({"key": f"band:{layer.name}:{len(rows)}", "kind": "input",
                              "region": f"a:{layer.output}", "segments": [band]})
                write = [band]
            elif layer.output in swapped and t is not None:
                write = box_transfers(swapped[layer.output], y.shape, ir.DTYPES[y.dtype], t["oh0"], t["oh"], t["ow0"],
                             t["ow"], t["oc0"], t["oc"])
            rows.append({"oc0": t["oc0"] if t else 0, "reads": reads, "write": write, "band": gathered,
                         "held": held})
        reads = [s for r in rows for b in r["reads"] for s in b["segments"]]
        writes = [s for r in rows for s in r["write"]]
        out.append({"name": layer.name, "tiles": [{"reads": r["reads"], "write": r["write"],
                                                   **({"band": r["band"]} if r["band"] else {}),
                                                   **({"held": r["held"]} if r["held"] else {})} for r in rows],
                    "read": sum(n for _, n in reads), "reads": len(reads),
                    "written": sum(n for _, n in writes), "writes": len(writes),
                    "weights_on_card": layer.name in stored})
    return out


def _chunk_segments(layer, graph, chunk, where):
    """A weight chunk's transfers: one per array (weights, then parameters)."""
    from ..config.views import param_arrays
    rows = []
    if layer.weights:
        rows.append(("weights", ir.weight_bytes_per_cout(layer, graph)))
    rows += [(name, size) for name, _, size in param_arrays(layer)]
    return [(where["at"] + where["arrays"][name] + chunk["c0"] * size, chunk["n"] * size) for name, size in rows]


def transfer_cycles(storage, nbytes, direction):
    """Core cycles one transfer of `nbytes` takes: the latency plus its whole
    blocks at the level's bandwidth."""
    blocks = -(-nbytes // storage["block"]) * storage["block"]
    bw = storage["read_bandwidth" if direction == "read" else "write_bandwidth"]
    return int(math.ceil((storage["latency_us"] * 1e-6 + blocks / bw) * storage["clock_hz"]))


def problem(graph, io, compute, storage):
    """The scheduler's problem (docs/out_of_core.md, tessera.storage.tasks):
    the firmware's pools (weight chunks double-buffered, one bounce buffer
    for an input box and one for an output box), each layer's tiles with
    their transfers and an equal share of the layer's compute time."""
    clock = storage["clock_hz"]
    tiles_all = [t for layer in io for t in layer["tiles"]]

    def need(t, kind):
        return sum(n for b in t["reads"] if b["kind"] == kind for _, n in b["segments"])
    def out(t):     # a band gathered in SRAM is held by each of its tiles
        return max(sum(n for _, n in t["write"]), t.get("band", 0))
    pools = {"in": max([need(t, "input") for t in tiles_all] + [1]),
             "w": 2 * max([need(t, "weights") for t in tiles_all] + [1]),
             "out": max([out(t) for t in tiles_all] + [1])}
    layers = []
    for layer, cycles in zip(io, compute):
        ns = int(round(cycles * 1e9 / clock))
        n = len(layer["tiles"])
        tiles = []
        for i, t in enumerate(layer["tiles"]):
            # a band read once and held by the band's later tiles: the same
            # read in consecutive tiles is one read (tessera.storage.tasks)
            reads = [{"pool": "w" if b["kind"] == "weights" else "in", "region": b["region"], "offset": int(o),
                      "bytes": int(nb)} for b in t["reads"] + t.get("held", []) for o, nb in b["segments"]]
            out_region = f"a:{graph.layer(layer['name']).output}"
            writes = [{"region": out_region, "offset": int(o), "bytes": int(nb)} for o, nb in t["write"]]
            tiles.append({"reads": reads, "compute_ns": ns // n + (1 if i < ns % n else 0), "writes": writes,
                          "holds": {"in": need(t, "input"), "w": need(t, "weights"),
                                    "out": out(t)}})
        layers.append({"name": layer["name"], "tiles": tiles})
    return {
        "storage": {"read_ns_per_kb": int(round(1024e9 / storage["read_bandwidth"])),
                    "write_ns_per_kb": int(round(1024e9 / storage["write_bandwidth"])),
                    "latency_ns": int(round(storage["latency_us"] * 1000)), "block": storage["block"]},
        "pools": pools,
        "layers": layers,
    }


def lower_bound_ns(graph, io, compute, storage):
    """No program with the in-order firmware's tiles and transfers (and the
    pools problem() gives them) does better: tessera.storage.estimate's
    bound, or None and why when the problem is outside the scheduler's
    model (a band written back once per channel tile)."""
    from . import estimate as estimator
    from . import tasks as tg
    p = problem(graph, io, compute, storage)
    try:
        return estimator.lower_bound(p, tg.build(p, 1)), None
    except TesseraError as err:
        return None, str(err)


def summary(graph, io, compute, storage, compute_label):
    """report.json's out_of_core: per layer bytes and transfers to and from
    the card, compute and IO time, SwapNN's normalized arithmetic intensity
    N = compute time / IO time and the bound; totals with the wear."""
    clock = storage["clock_hz"]
    layers, tot_io, tot_compute = [], 0, 0
    blocks_written = 0
    for layer, cycles in zip(io, compute):
        segs_r = [s for t in layer["tiles"] for b in t["reads"] for s in b["segments"]]
        segs_w = [s for t in layer["tiles"] for s in t["write"]]
        io_cycles = (sum(transfer_cycles(storage, n, "read") for _, n in segs_r)
                     + sum(transfer_cycles(storage, n, "write") for _, n in segs_w))
        blocks_written += sum(-(-n // storage["block"]) for _, n in segs_w)
        entry = {"name": layer["name"], "read_bytes": layer["read"], "reads": layer["reads"],
                 "written_bytes": layer["written"], "writes": layer["writes"],
                 "weights_on_card": layer["weights_on_card"],
                 "compute_ms": round(cycles / clock * 1e3, 3), "io_ms": round(io_cycles / clock * 1e3, 3)}
        if io_cycles:
            entry["intensity"] = round(cycles / io_cycles, 3)
            entry["bound"] = "io" if cycles < io_cycles else "compute"
        layers.append(entry)
        tot_io += io_cycles
        tot_compute += cycles
    written = sum(layer["written"] for layer in io)
    capacity_blocks = storage["size"] // storage["block"]
    totals = {
        "read_bytes": sum(layer["read"] for layer in io), "written_bytes": written,
        "reads": sum(layer["reads"] for layer in io), "writes": sum(layer["writes"] for layer in io),
        "io_bound_layers": sum(1 for e in layers if e.get("bound") == "io"),
        "compute_ms": round(tot_compute / clock * 1e3, 3), "io_ms": round(tot_io / clock * 1e3, 3),
        # wear: blocks written per inference, and inferences until every
        # block of the planned area has taken `endurance` writes (ideal wear
        # leveling by the card's controller)
        "blocks_written": blocks_written,
        "inferences_to_wear_out": (capacity_blocks * storage["endurance"] // blocks_written
                                   if blocks_written else None),
        # one frame with unlimited SRAM: nothing swapped, compute only
        "unlimited_ms": round(tot_compute / clock * 1e3, 3),
        # the firmware's order today, nothing overlapped: every transfer then compute
        "in_order_ms": round((tot_compute + tot_io) / clock * 1e3, 3),
    }
    return {"level": storage["level"], "compute": compute_label, "layers": layers, "totals": totals}


def report(graph, the_plan, tilings, verdict, meta):
    """report.json's out_of_core for a run on a target with a storage level:
    the static accounting (checked against what the run counted), the
    compute times from the run's counts, and the IO/compute scheduler's
    estimates over one frame and over FRAMES pipelined frames."""
    storage = meta["storage"]
    by_name = {t["layer"]: t for t in tilings}
    prog = _program(storage)
    # the firmware's traffic: the program's when it runs one, else the in-order code's
    io = prog["io"] if prog.get("program") else layer_io(graph, the_plan, by_name, storage)
    compute = [int(c) for c in verdict.get("counts", [0] * len(io))]
    label = (f"{meta['counts']} as core cycles at {storage['clock_hz'] / 1e6:g} MHz "
             "(one count per cycle: an assumption)")
    out = summary(graph, io, compute, storage, label)
    measured = verdict.get("io")
    if measured:
        out["totals"]["measured"] = {
            "read_bytes": sum(m["read"] for m in measured), "written_bytes": sum(m["written"] for m in measured),
            "reads": sum(m["reads"] for m in measured), "writes": sum(m["writes"] for m in measured)}
    if prog.get("program"):
        from . import firmware
        out["firmware"] = firmware.report(prog, compute, storage["clock_hz"])
        counted = _counted(storage)
        if counted is not None:
            out["firmware"]["counted"] = counted   # the interpreter's counts (run.log's `TSR program`)
        out["schedule"] = firmware.estimate(prog, compute, storage["clock_hz"], FRAMES)
    else:
        out["firmware"] = {"program": "in order", "why": prog.get("why", "no program.json")}
        out["schedule"] = estimate(graph, io, compute, storage)
    return out


def _counted(storage):
    """What the firmware's interpreter counted: ops by kind and bytes (the
    run log's `TSR program` line, beside program.json), or None."""
    import os
    log = os.path.join(os.path.dirname(storage.get("program") or ""), "run.log")
    if not storage.get("program") or not os.path.exists(log):
        return None
    with open(log) as f:
        for line in f:
            if line.startswith("TSR program "):
                return {k: int(v) for k, v in (p.split("=", 1) for p in line.split()[2:])}
    return None


def _program(storage):
    """The build's program.json (tessera.storage.firmware), or {}."""
    import json
    import os
    path = storage.get("program")
    if not path or not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


FRAMES = 10
# the largest problem scheduled in a build: the scheduler's task graph has a
# task per transfer per frame (11,300 transfers take about 7 s per frame)
MAX_SCHEDULED_TRANSFERS = 20000


def estimate(graph, io, compute, storage):
    """The scheduler's estimates (tessera.storage.schedule), in ms: one frame
    and FRAMES pipelined frames, against unlimited SRAM (compute only). None
    when the scheduler is not part of this checkout."""
    try:
        from . import estimate as estimator
        from . import timeline
    except ImportError:
        return None
    transfers = sum(layer["reads"] + layer["writes"] for layer in io)
    if transfers > MAX_SCHEDULED_TRANSFERS:
        # every transfer is a task of the scheduler's graph, FRAMES times over
        return {"skipped": f"{transfers} transfers, more than the {MAX_SCHEDULED_TRANSFERS} the build schedules "
                           "(layers moving boxes pixel by pixel; see docs/out_of_core.md)"}
    p = problem(graph, io, compute, storage)
    try:
        full = estimator.estimate(p, frames=FRAMES, where="out-of-core schedule")
        est = full["summary"]
    except TesseraError as err:
        # a problem outside the scheduler's model (e.g. a band written back
        # once per channel tile): the report says so, the build goes on
        return {"skipped": str(err)}
    ms = lambda ns: round(ns / 1e6, 3)  # noqa: E731
    return {"latency_ms": ms(est["latency_ns"]), "in_order_ms": ms(est["in_order_ns"]),
            "unlimited_ms": ms(est["unlimited_ns"]), "lower_bound_ms": ms(est["lower_bound_ns"]),
            "latency_vs_unlimited": round(est["latency_ns"] / est["unlimited_ns"], 4) if est["unlimited_ns"] else None,
            "program": est["candidate"], "pools": p["pools"],
            "frames": FRAMES, "pipelined_ms_per_frame": ms(est["pipelined_ns"] / FRAMES),
            "throughput_fps": round(est["throughput_fps_x1000"] / 1000, 3) if est["throughput_fps_x1000"] else None,
            "unlimited_fps": round(est["unlimited_fps_x1000"] / 1000, 3) if est["unlimited_fps_x1000"] else None,
            "timeline": timeline.bars(p, full["one"]["replay"])}
