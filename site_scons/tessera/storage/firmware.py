"""The program the firmware executes (docs/out_of_core.md, "What runs"):
the scheduler's chosen program for this build's tiles, as data that the
code generator writes as C (src/program.c, tessera.codegen.program) for the
interpreter in kernels/include/tessera/program.h.

    res = build(graph, the_plan, tilings, steps, storage, budget, compute)
    res["program"]   the ops (None: the firmware runs in order, res["why"])
    text = codegen.program.c_source(prefix, act_level, res, n_layers)

The firmware's problem differs from the planner's estimate (tessera.storage.ooc) in
what the firmware needs to be exact: a tile lists every read it uses (the
same read in consecutive tiles is one transfer, held), weights come from
their arrays on the card in chunks of consecutive channel tiles sized for
the w pool (_weight_reads), and the pools are memory the firmware owns:
the activation level's `reserved: {pools: N}` bytes, which the memory plan
leaves alone; the in and out pools as large as their largest tile needs,
the w pool the rest. Whole layers and fused steps are one compute each,
stepped by the network's run loop; they must not touch the card.
"""

from .. import ir
from ..errors import TesseraError
from ..tiler import tiles as tile_list
from ..tiles.geometry import box_transfers, rows_first, split_blocks
from ..config.views import is_whole, param_arrays, tiler_layer
from . import replay as rp
from . import schedule as sch
from . import tasks as tg

KIND_WEIGHTS, KIND_PARAM = 8, 9
# the scheduler's time grows with the transfers (tessera.storage.ooc's bound, with
# a tile's held reads counted once per tile here; vgg16_224 lists 163,737)
MAX_TRANSFERS = 200000
ALIGN = 8


def _align(n):
    return n // ALIGN * ALIGN


def build(graph, the_plan, tilings, steps, storage, budget, compute_ns):
    """The program (_build), or TesseraError when a layer needs it: a split
    layer's constants on the card stream only through the program."""
    res = _build(graph, the_plan, tilings, steps, storage, budget, compute_ns)
    split = [name for name, where in the_plan["weights"].get("storage", {"layers": {}})["layers"].items()
             if "split" in where]
    if res.get("program") is None and split:
        raise TesseraError(f"layer {split[0]}", "its reduction is split and its weights are on the card: only the "
                           f"out-of-core program streams them chunk by chunk, and this build has none ({res['why']})",
                           "remove what keeps the program out (in brackets) or give the tile level room for "
                           "one output's reduction")
    return res


def _build(graph, the_plan, tilings, steps, storage, budget, compute_ns):
    """{"problem", "program", "candidate", "layer_level", "layer_tiles",
    "pools", "phases", "io"} or, when the firmware keeps the in-order code,
    {"program": None, "why"}. tilings: layer name -> tiling; steps:
    schedule.json's steps; compute_ns: per layer (network order); budget:
    the activation level's reserved pools bytes (None: the pools take the
    arena's free bytes, phase by phase; 0: no program)."""
    if budget == 0:
        return {"program": None, "why": "the target turns the program off (memory.<activations>.reserved.pools: 0)"}
    level = storage["level"]
    spill = the_plan["activations"].get("spill")
    swapped = spill["offsets"] if spill and spill["level"] == level else {}
    bands = set(spill.get("bands", ())) if swapped else set()
    stored = the_plan["weights"].get("storage", {"layers": {}})["layers"]
    fused = {name for s in steps if s["kind"] != "layer" for name in s["layers"]}
    layers, layer_level, pending, pending_split = [], [], [], []
    for li, layer in enumerate(graph.layers):
        card = (layer.name in stored or layer.output in swapped or any(n in swapped for n in layer.inputs))
        stepped = is_whole(layer, graph) or layer.name in fused
        if stepped and card:
            return {"program": None, "why": f"layer {layer.name} ({'fused' if layer.name in fused else 'whole'}) "
                                            "touches the card; only tiled layers execute the program"}
        y = graph.tensor(layer.output)
        band_out = f"{layer.name}:bounce:out" in bands
        if band_out and not (rows_first(tilings[layer.name]) or tilings[layer.name]["tile"]["c"] >= y.shape[2]):
            # a channel slice read back and rewritten per tile: every byte of
            # the band written several times, outside the scheduler's model
            return {"program": None, "why": f"layer {layer.name} rewrites a band of its output on the card per "
                                            "channel tile (a channel-sliced writer with weights on the card), "
                                            "outside the scheduler's model"}
        layer_level.append(1 if stepped else 0)
        ts = [None] if stepped else list(tile_list(tiler_layer(layer, graph), tilings[layer.name]))
        split = stored.get(layer.name, {}).get("split")
        if split and not stepped:
            if layer.output in swapped or any(n in swapped for n in layer.inputs):
                raise TesseraError(f"layer {layer.name}", "its reduction is split and its activations are on the "
                                   "card (only its weights may be)", f"give {the_plan['activations']['level']} "
                                   "room for its input and output")
            # a step per (tile, reduction chunk): its weights read once the chunks are sized
            n = len(ts) * len(split["chunks"])
            if n > 0xFFFF:
                return {"program": None, "why": f"layer {layer.name} has {n} split steps, more than the program's "
                                                "65535 computes per layer"}
            pending_split.append((len(layers), ts))
            layers.append({"name": layer.name, "tiles": [
                {"reads": [], "writes": [], "holds": {"in": 0, "w": 0, "out": 0},
                 "compute_ns": compute_ns[li] // n + (1 if i < compute_ns[li] % n else 0)} for i in range(n)]})
            continue
        tiles = []
        for i, t in enumerate(ts):
            reads = []
            if t is not None and layer.name in stored:
                pending.append((len(layers), i, t))    # its weight reads, once the chunks are sized
            for k, name in enumerate(layer.inputs):
                if name in swapped and t is not None and f"{layer.name}:bounce:in{k}" in bands:
                    # a storage-level tile of the input: the band of the tile's
                    # rows, every channel, one read held by the band's tiles,
                    # each cutting its box from it (codegen.layer)
                    x = graph.tensor(name)
                    row = x.shape[1] * x.shape[2] * ir.DTYPES[x.dtype]
                    reads.append({"pool": "in", "region": f"a:{name}", "kind": k, "band": True,
                                  "offset": swapped[name] + t["ih0"] * row, "bytes": t["ih"] * row})
                elif name in swapped and t is not None:
                    x = graph.tensor(name)
                    for o, n in box_transfers(swapped[name], x.shape, ir.DTYPES[x.dtype], t["ih0"], t["ih"], t["iw0"],
                                     t["iw"], t["ic0"], t["ic"]):
                        reads.append({"pool": "in", "region": f"a:{name}", "kind": k, "offset": o, "bytes": n})
            writes, shared, held_out = [], False, 0
            if band_out and t is not None:
                # a storage-level tile of the output: the band of the tile's
                # rows, every channel, gathered in one out buffer from the
                # band's tiles (walked row band first), written once by its last
                row = y.shape[1] * y.shape[2] * ir.DTYPES[y.dtype]
                held_out = t["oh"] * row
                shared = i > 0 and ts[i - 1]["oh0"] == t["oh0"]
                if i + 1 == len(ts) or ts[i + 1]["oh0"] != t["oh0"]:
                    writes.append({"region": f"a:{layer.output}", "offset": swapped[layer.output] + t["oh0"] * row,
                                   "bytes": held_out, "rel": 0})
            elif layer.output in swapped and t is not None:
                rel = 0
                for o, n in box_transfers(swapped[layer.output], y.shape, ir.DTYPES[y.dtype], t["oh0"], t["oh"], t["ow0"],
                                 t["ow"], t["oc0"], t["oc"]):
                    writes.append({"region": f"a:{layer.output}", "offset": o, "bytes": n, "rel": rel})
                    rel += n
            ns = compute_ns[li] // len(ts) + (1 if i < compute_ns[li] % len(ts) else 0)
            holds = {p: sum(r["bytes"] for r in reads if r["pool"] == p) for p in ("in", "w")}
            holds["out"] = max(held_out, sum(w["bytes"] for w in writes))
            tiles.append({"reads": reads, "compute_ns": ns, "writes": writes, "holds": holds}
                         | ({"band": True} if shared else {}))
        layers.append({"name": layer.name, "tiles": tiles})
    transfers = sum(len(t["reads"]) + len(t["writes"]) for la in layers for t in la["tiles"])
    if transfers > MAX_TRANSFERS:
        return {"program": None, "why": f"{transfers} transfers listed by its tiles, more than the {MAX_TRANSFERS} "
                                        "the build schedules"}
    if budget:
        phases = [(0, len(layers), 0, _align(budget))]
        where = f"the target reserves {budget} bytes for the pools (memory.<activations>.reserved.pools)"
    else:
        # no SRAM of its own: the pools take the activation arena's bytes no
        # tensor of the plan holds, per phase (a run of layers sharing a free range)
        stream = the_plan["weights"].get("stream")
        foreign = sorted(set(stream["layers"]) - set(stored)) if stream and stored else []
        if foreign:
            return {"program": None, "why": f"layer {foreign[0]} streams its weights through the activation arena, "
                                            "where the program's pools would be"}
        phases = _phases(graph, the_plan)
        where = (f"the pools take the {the_plan['activations']['level']} bytes the memory plan leaves free "
                 "(no memory.<activations>.reserved.pools)")
    programs, placed = [], []
    for first, end, base, room in phases:
        sub = layers[first:end]
        need = {p: max([t["holds"][p] for la in sub for t in la["tiles"]] + [ALIGN]) for p in ("in", "out")}
        pools = {p: -(-n // ALIGN) * ALIGN for p, n in need.items()}
        pools["w"] = _align(room - pools["in"] - pools["out"])
        if pools["w"] >= ALIGN and not any(first <= x[0] < end for x in pending + pending_split):
            # no weights from the card: the room goes to the in and out pools,
            # in proportion to their largest tile's, so the next band loads
            # (and the last one is written) while one computes
            grow = (room - ALIGN) / (pools["in"] + pools["out"])
            pools = {"in": _align(int(pools["in"] * grow)), "w": ALIGN}
            pools["out"] = _align(room - pools["in"] - ALIGN)
        names = f"layers {sub[0]['name']}..{sub[-1]['name']}" if len(sub) > 1 else f"layer {sub[0]['name']}"
        if pools["w"] < ALIGN:
            return {"program": None, "why": f"{names}: {room} bytes for the pools, {pools['in']} needed by input "
                                            f"and {pools['out']} by output tiles; {where}"}
        why = _weight_reads(graph, layers, [x for x in pending if first <= x[0] < end], stored, pools["w"]) or \
            _split_reads(graph, layers, [x for x in pending_split if first <= x[0] < end], stored, pools["w"])
        if why:
            return {"program": None, "why": f"{why}; {names}: {room} bytes for the pools, {pools['in']} go to "
                                            f"input and {pools['out']} to output tiles; {where}"}
        problem = _problem(storage, pools, sub)
        try:
            best = sch.schedule(problem, 1, where="program.c")
        except TesseraError as err:     # outside the scheduler's model: the in-order firmware, and why
            return {"program": None, "why": str(err)}
        computes = [(op["layer"], op["tile"]) for op in best["program"]["ops"] if op["op"] == "COMPUTE"]
        if computes != [(li, ti) for li, la in enumerate(sub) for ti in range(len(la["tiles"]))]:
            return {"program": None, "why": f"the scheduler's program ({best['candidate']}) computes out of order"}
        programs.append(best)
        placed.append({"layers": [sub[0]["name"], sub[-1]["name"]], "base": base, "pools": pools})
    if budget:
        problem, best = _problem(storage, placed[0]["pools"], layers), programs[0]
        program, candidate = best["program"], best["candidate"]
    else:
        # one program: the phases' ops one after the other (each ends waiting
        # for its last transfer), their pool offsets made offsets in the arena
        usable = the_plan["activations"]["usable"]
        problem = _problem(storage, dict.fromkeys(tg.POOLS, usable), layers)
        program = {"frames": 1, "ops": _join(programs, placed, phases, layers)}
        candidate = " + ".join(dict.fromkeys(b["candidate"] for b in programs))     # the phases' (distinct)
    tasks = tg.build(problem, 1)
    end = rp.replay(problem, program, "program.c", tasks)["end"]       # the whole program, checked
    naive = rp.replay(problem, sch.naive_program(problem), "program.c", tasks)["end"]
    big = {p: max(x["pools"][p] for x in placed) for p in tg.POOLS}
    return {"problem": problem, "detail": layers, "program": program, "tasks": tasks, "candidate": candidate,
            "estimate_ns": end, "in_order_ns": naive, "layer_level": layer_level, "pools": big,
            "phases": None if budget else placed, "io": io(layers, tasks)}


def declared_arena(the_plan):
    """The bytes network.c declares for the activation arena of a target
    with a storage level: the level's usable bytes when the program's pools
    take the arena's free bytes (no `reserved: {pools: N}`), else None (the
    plan's peak). The report's RAM line counts what this says."""
    if "pools" in the_plan["activations"].get("reserved", {}):
        return None
    return the_plan["activations"]["usable"]


def _problem(storage, pools, layers):
    """The scheduler's problem for these layers (tessera.storage.tasks)."""
    return {"storage": storage["costs"], "pools": dict(pools),
            "layers": [{"name": la["name"],
                        "tiles": [{k: t[k] for k in ("compute_ns", "holds", "band") if k in t}
                                  | {"reads": [{k: r[k] for k in ("pool", "region", "offset", "bytes")}
                                               for r in t["reads"]],
                                     "writes": [{k: w[k] for k in ("region", "offset", "bytes")} for w in t["writes"]]}
                                  for t in la["tiles"]]} for la in layers]}


# a phase grows while the next layer's free range is at most 1 / PHASE_KEEP
# times the phase's, and the range they share keeps SHARED_KEEP of the
# phase's: below, every earlier layer's w pool would shrink with it
# (vgg16_224: pool10's output would take conv2..conv10's pools from 257 to
# 157 kB, 0.61 of it, tripling their weight reads; vgg16_64's pool4..conv8
# share 0.74 of conv5's and stay one phase: two cost it 7 ms a frame)
PHASE_KEEP = 0.5
SHARED_KEEP = 0.65


def _phases(graph, the_plan):
    """[(first layer, end layer, arena offset, bytes)]: runs of consecutive
    layers and, for each, the largest byte range of the activation arena
    that no tensor of the plan holds while any of them runs (a tensor lives
    from its producer to its last reader; inputs from the start, outputs to
    the end). Every program buffer of a phase lies in its range; a phase
    ends waiting for all its transfers, so the next may use other bytes.
    Longer phases let reads run further ahead; a much smaller shared range
    would starve the pools: a new phase starts there."""
    from ..planning.guard import tensor_lives
    usable = the_plan["activations"]["usable"]
    n = len(graph.layers)
    held = [[] for _ in range(n)]
    # the tensors only: the bounce buffers and weight-stream chunks are the
    # in-order firmware's, unused by the program
    for first, last, at, size in tensor_lives(graph, the_plan):
        for step in range(first, last + 1):
            held[step].append((at, at + size))

    def largest(busy):
        best, at = (0, 0), 0
        for a, b in sorted(busy) + [(usable, usable)]:
            lo = -(-at // ALIGN) * ALIGN
            if a - lo > best[1] - best[0]:
                best = (lo, a)
            at = max(at, b)
        return best

    # layers reading weights from the card, and moving activations to or from it
    stored = the_plan["weights"].get("storage", {"layers": {}})["layers"]
    swapped = (the_plan["activations"].get("spill") or {}).get("offsets", {})
    weights = [layer.name in stored for layer in graph.layers]
    moves = [layer.output in swapped or any(x in swapped for x in layer.inputs) for layer in graph.layers]
    out, first, busy = [], 0, list(held[0])
    for li in range(1, n + 1):
        # a phase moving only activations ends where the card's weights
        # begin: its w pool would be idle, its in and out pools take the
        # room instead (_build), so its bands double buffer
        cut = li < n and weights[li] and any(moves[first:li]) and not any(weights[first:li])
        if li < n and not cut:
            mine, shared = largest(held[li]), largest(busy + held[li])
            now = largest(busy)
            keep = now[1] - now[0]
            if shared[1] - shared[0] >= SHARED_KEEP * keep and (mine[1] - mine[0]) * PHASE_KEEP <= keep:
                busy += held[li]
                continue
        lo, hi = largest(busy)
        out.append((first, li, lo, _align(hi - lo)))
        if li < n:
            first, busy = li, list(held[li])
    return out


def pool_lives(graph, the_plan):
    """guard=1 (tessera.planning.guard): [(first step, last step, offset, bytes)]
    the program's pools may hold in the arena: each phase's range from its
    first layer to the next phase's first (where its last writes go)."""
    n = len(graph.layers)
    return [(first, min(end, n - 1), base, room) for first, end, base, room in _phases(graph, the_plan)]


def _join(programs, placed, phases, layers):
    """The phases' programs as one: task ids, layers and pool offsets
    made the whole network's (pools: arena offsets)."""
    ops, tid = [], 0
    for best, phase, (first, end, base, _) in zip(programs, placed, phases):
        at = {"in": base, "w": base + phase["pools"]["in"], "out": base + phase["pools"]["in"] + phase["pools"]["w"]}
        sub = _problem({"costs": {"read_ns_per_kb": 1, "write_ns_per_kb": 1, "latency_ns": 0, "block": 1}},
                       phase["pools"], layers[first:end])
        sub_tasks = tg.build(sub, 1)
        for op in best["program"]["ops"]:
            op = dict(op, id=op["id"] + tid)
            if op["op"] != "WAIT":
                op["layer"] += first
            if op["op"] == "READ":
                op["buf"] += at[op["pool"]]
            elif op["op"] == "WRITE":
                op["src"] += at["out"]
            elif op["op"] == "COMPUTE":
                reads = sub_tasks[op["id"] - tid]["reads"]
                op["bufs"] = [b + at[sub_tasks[r]["pool"]] for b, r in zip(op["bufs"], reads)]
                op["out"] += at["out"]
            ops.append(op)
        tid += len(sub_tasks)
    return ops


def _weight_reads(graph, layers, pending, stored, w_pool):
    """Each tile's reads of its layer's constants on the card, first in
    its reads: the weights in chunks of consecutive channel tiles as large
    as two fit the w pool (the next chunk loads while one is used; every
    transfer pays the card's latency), the parameter arrays whole beside
    them (a transfer each, held through the layer) when they leave room for
    two chunks, else their rows of each chunk. A tile uses its rows of
    each read: `delta` into it, `use` bytes. None, or why the pool is too
    small."""
    by_layer = {}
    for li, ti, t in pending:
        by_layer.setdefault(li, []).append((ti, t))
    for li, tiles in by_layer.items():
        layer = graph.layers[li]
        where = stored[layer.name]
        params = [(name, size, KIND_PARAM + p) for p, (name, _, size) in enumerate(param_arrays(layer))]
        cout = graph.tensor(layer.output).shape[-1]
        p_bytes = sum(size * cout for _, size, _ in params)
        wpc = ir.weight_bytes_per_cout(layer, graph) if layer.weights else 0
        ctiles = list(dict.fromkeys((t["oc0"], t["oc"]) for _, t in tiles))
        widest = max(oc for _, oc in ctiles)
        # the parameters whole when two weight chunks still fit beside them,
        # else in the chunks, as rows of each array
        whole = p_bytes + 2 * widest * wpc <= w_pool
        per = wpc if whole else wpc + sum(size for _, size, _ in params)
        cap = max(((w_pool - p_bytes) if whole else w_pool) // 2, widest * per)
        if widest * per + (p_bytes if whole else 0) > w_pool:
            return (f"layer {layer.name}'s constants for one channel tile ({widest * per} B) do not fit a w pool "
                    f"of {w_pool} B")
        chunk_of, c0, n = {}, None, 0
        for oc0, oc in ctiles:
            if c0 is None or oc0 != c0 + n or (n + oc) * per > cap:
                c0, n = oc0, 0
            n += oc
            chunk_of[oc0] = c0
        ends = {}
        for oc0, oc in ctiles:
            ends[chunk_of[oc0]] = max(ends.get(chunk_of[oc0], 0), oc0 + oc)
        for ti, t in tiles:
            reads = []
            if wpc:
                c0 = chunk_of[t["oc0"]]
                reads.append({"pool": "w", "region": f"w:{layer.name}", "kind": KIND_WEIGHTS,
                              "offset": where["at"] + where["arrays"]["weights"] + c0 * wpc,
                              "bytes": (ends[c0] - c0) * wpc, "delta": (t["oc0"] - c0) * wpc, "use": t["oc"] * wpc})
            c0 = chunk_of[t["oc0"]]
            for name, size, kind in params:
                first, count = (0, cout) if whole else (c0, ends[c0] - c0)
                reads.append({"pool": "w", "region": f"w:{layer.name}", "kind": kind,
                              "offset": where["at"] + where["arrays"][name] + first * size, "bytes": count * size,
                              "delta": (t["oc0"] - first) * size, "use": t["oc"] * size})
            tile = layers[li]["tiles"][ti]
            tile["reads"] = reads + tile["reads"]
            tile["holds"]["w"] = sum(r["bytes"] for r in reads)
    return None


def _split_reads(graph, layers, pending, stored, w_pool):
    """The reads of each step of a split layer whose constants are on the
    card, laid out in step order (tessera.tiles.geometry.split_blocks):
    consecutive steps' blocks are consecutive bytes, so one read takes as
    many whole steps as two reads fit the w pool (the next loads while one
    is used; every transfer pays the card's latency). A step's refs: its
    channel tile's parameter rows (the first chunk of a tile), then its
    chunk of weights [oc][window][kc], each `delta` into the read, `use`
    bytes. None, or why the pool is too small."""
    for li, ts in pending:
        layer = graph.layers[li]
        where = stored[layer.name]
        sp = where["split"]
        params = [(name, size, KIND_PARAM + p) for p, (name, _, size) in enumerate(param_arrays(layer))]
        cout = graph.tensor(layer.output).shape[-1]
        blocks, _ = split_blocks(cout, sp["c"], sp["chunks"], sp["window"], [(n, s) for n, s, _ in params])
        by_oc0 = {b["oc0"]: b for b in blocks}
        units = []          # per step: [(kind, offset in the layer, bytes)], consecutive
        for t in ts:
            b = by_oc0[t["oc0"]]
            assert b["oc"] == t["oc"], (layer.name, t["oc0"])
            for j, (_, kc) in enumerate(sp["chunks"]):
                parts = [(kind, b["params"][name], b["oc"] * size) for name, size, kind in params] if j == 0 else []
                units.append(parts + [(KIND_WEIGHTS, b["chunks"][j], b["oc"] * sp["window"] * kc)])
        largest = max(u[-1][1] + u[-1][2] - u[0][1] for u in units)
        if largest > w_pool:
            return f"layer {layer.name}'s constants for one split step ({largest} B) do not fit a w pool of {w_pool} B"
        cap = max(w_pool // 2, largest)
        group, groups = None, []
        for u in units:
            lo, hi = u[0][1], u[-1][1] + u[-1][2]
            if group is None or lo != group[1] or hi - group[0] > cap:
                group = [lo, hi]
                groups.append(group)
            group[1] = hi
            u.append(group)
        for tile, u in zip(layers[li]["tiles"], units):
            lo, hi = u[-1]
            tile["reads"] = [{"pool": "w", "region": f"w:{layer.name}", "kind": kind, "offset": where["at"] + lo,
                              "bytes": hi - lo, "delta": at - lo, "use": n} for kind, at, n in u[:-1]]
            tile["holds"]["w"] = hi - lo
    return None


def io(layers, tasks):
    """Per layer the card traffic the program makes, in tessera.storage.ooc's
    layer_io form (each read task once: a read held across tiles is one
    transfer), for the report's summary."""
    out = []
    for li, layer in enumerate(layers):
        reads = [t for t in tasks if t["kind"] == "read" and t["layer"] == li]
        writes = [t for t in tasks if t["kind"] == "write" and t["layer"] == li]
        out.append({"name": layer["name"],
                    "tiles": [{"reads": [{"kind": "input" if t["pool"] == "in" else "weights",
                                          "segments": [(t["offset"], t["bytes"])]} for t in reads],
                               "write": [(t["offset"], t["bytes"]) for t in writes]}],
                    "read": sum(t["bytes"] for t in reads), "reads": len(reads),
                    "written": sum(t["bytes"] for t in writes), "writes": len(writes),
                    "weights_on_card": any(t["pool"] == "w" for t in reads)})
    return out


def totals(res):
    """What the program moves, per op kind: the harness's counts must equal it."""
    ops = res["program"]["ops"] if res.get("program") else []
    count = {k: sum(1 for op in ops if op["op"] == k) for k in ("READ", "WRITE", "WAIT", "COMPUTE")}
    return {"ops": len(ops), "reads": count["READ"], "writes": count["WRITE"], "waits": count["WAIT"],
            "computes": count["COMPUTE"],
            "read_bytes": sum(op["bytes"] for op in ops if op["op"] == "READ"),
            "written_bytes": sum(op["bytes"] for op in ops if op["op"] == "WRITE")}


def _measured(problem, compute, clock_hz):
    """The problem with each layer's measured count (cycles at clock_hz)
    spread evenly over its tiles."""
    layers = []
    for layer, cycles in zip(problem["layers"], compute):
        ns, n = int(round(cycles * 1e9 / clock_hz)), len(layer["tiles"])
        layers.append(dict(layer, tiles=[dict(t, compute_ns=ns // n + (1 if i < ns % n else 0))
                                         for i, t in enumerate(layer["tiles"])]))
    return dict(problem, layers=layers)


def report(prog, compute, clock_hz):
    """report.json's out_of_core.firmware: the program the firmware ran, its
    estimate with the measured compute (the replay of exactly its ops), the
    in-order estimate beside it (the same transfers and computes one after
    the other), and what the program moves."""
    from . import timeline
    p = _measured(prog["problem"], compute, clock_hz)
    ran = rp.replay(p, prog["program"], "program.json")
    end = ran["end"]
    unlimited = sum(t["compute_ns"] for layer in p["layers"] for t in layer["tiles"])
    # in order: the same transfers, each once, and the compute, one after
    # the other (nothing overlapped: the firmware's order before the program)
    in_order = unlimited + sum(t["ns"] for t in tg.build(p, 1) if t["kind"] != "compute")
    ms = lambda ns: round(ns / 1e6, 3)  # noqa: E731
    return {"program": prog["candidate"], "compute_for_choice": prog.get("compute"),
            "estimate_ms": ms(end), "in_order_ms": ms(in_order), "unlimited_ms": ms(unlimited),
            "estimate_vs_unlimited": round(end / unlimited, 4) if unlimited else None,
            "pools": prog["pools"], "phases": prog.get("phases"), "ops": prog["totals"],
            "timeline": timeline.bars(p, ran)}


def _as_run(prog, compute, clock_hz):
    """The firmware's problem with the measured compute and the pools it
    has (with phases: the largest phase's, for every layer)."""
    return dict(_measured(prog["problem"], compute, clock_hz), pools=prog["pools"])


def lower_bound_ns(prog, compute, clock_hz):
    """No program with the firmware's tiles and pools does better
    (tessera.storage.estimate.lower_bound), with the measured compute."""
    from . import estimate as estimator
    p = _as_run(prog, compute, clock_hz)
    return estimator.lower_bound(p, tg.build(p, 1))


def estimate(prog, compute, clock_hz, frames):
    """out_of_core.schedule for the firmware's problem with the measured
    compute (the scheduler's best over its candidates, which may differ
    from the program chosen at build time with estimated compute)."""
    from ..errors import TesseraError
    from . import estimate as estimator
    from . import timeline
    p = _as_run(prog, compute, clock_hz)
    try:
        full = estimator.estimate(p, frames=frames, where="out-of-core schedule")
    except TesseraError as err:
        return {"skipped": str(err)}
    est = full["summary"]
    ms = lambda ns: round(ns / 1e6, 3)  # noqa: E731
    return {"latency_ms": ms(est["latency_ns"]), "in_order_ms": ms(est["in_order_ns"]),
            "unlimited_ms": ms(est["unlimited_ns"]), "lower_bound_ms": ms(est["lower_bound_ns"]),
            "latency_vs_unlimited": round(est["latency_ns"] / est["unlimited_ns"], 4) if est["unlimited_ns"] else None,
            "program": est["candidate"], "pools": p["pools"],
            "frames": frames, "pipelined_ms_per_frame": ms(est["pipelined_ns"] / frames),
            "throughput_fps": round(est["throughput_fps_x1000"] / 1000, 3) if est["throughput_fps_x1000"] else None,
            "unlimited_fps": round(est["unlimited_fps_x1000"] / 1000, 3) if est["unlimited_fps_x1000"] else None,
            "timeline": timeline.bars(p, full["one"]["replay"])}
