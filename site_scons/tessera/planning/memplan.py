"""The network's memory plan: every buffer's place, fixed at build time.

- activations: one arena in the activation level, offsets from lifetimes
  (tessera.planning.alloc.plan_level; residual branches live until their add). When
  they cannot fit and a slower writable level is joined to it by a DMA
  engine (GAP8's L3), the largest tensors at the fullest step move there
  (as few as needed); the layers that read or write them pass each tile
  through a bounce buffer in the activation level;
- weights: each layer's weights and per-channel parameters in the weight
  level (placed by the linker in that level's section; their total is
  checked here so an overflow is named before the linker would);
- L1: each layer's regions (tessera.planning.alloc.l1_layout of its tiling); the
  tile arena is as large as the largest layer needs.
- weight stream (only when weights reach L1 through the activation level,
  as GAP8's L3 -> L2 -> L1): every layer's constants flow through the room
  the activations leave in that level, in network order, in chunks of whole
  L1 channel tiles; chunk k + 1 loads while chunk k feeds the tiles (DORY's
  network loop: the next layer's weights arrive while the current layer
  computes; a layer whose weights do not fit is cut into several chunks
  over its output channels, DORY's L3 tiling). Each chunk has its place,
  fixed here, live from the start of its load to the end of its use.

plan() returns the whole plan (memplan.json, for the report) and one small
slice per layer (what that layer's code generation reads), so a change that
moves one layer's buffers regenerates only that layer.
"""

from . import inplace as direct_mod, hazard
from .. import ir
from .alloc import l1_layout, plan_level
from ..errors import FitError
from .overlap import candidates as overlap_candidates, fused_candidates
from ..config.views import param_arrays, tiler_layer
from ..tiles.geometry import chunks, rows_first, w_per_k

ALIGN = 4


def _align(n, a=ALIGN):
    return (n + a - 1) // a * a


def weight_bytes(layer, graph):
    """Bytes a layer keeps in the weight level: weights plus per-channel
    parameter arrays (each aligned)."""
    co = graph.tensor(layer.output).shape[2]
    total = _align(ir.weight_bytes_per_cout(layer, graph) * co)
    for _, _, size in param_arrays(layer):
        total += _align(size * co)
    return total


def band_bytes(layer, graph, tiling):
    """Bytes of a band bounce buffer, or 0: on a storage level, an output
    tile that is not whole rows of every channel goes through a band of its
    rows, every channel (docs/out_of_core.md): gathered from the band's
    tiles and written once when they are walked row band first (a tile of
    every channel, or `order: hcw`), else read, the slice put in, written
    back. A tile of whole rows is one transfer already; a band of every row
    would be the whole tensor."""
    y = graph.tensor(layer.output)
    t = tiling["tile"]
    if not tiling.get("tiled", True) or (t["c"] >= y.shape[2] and (t["w"] >= y.shape[1] or t["h"] >= y.shape[0])):
        return 0
    return min(tiling["tile"]["h"], y.shape[0]) * y.shape[1] * y.shape[2] * ir.DTYPES[y.dtype]


def in_band_bytes(layer, graph, tiling, i):
    """Bytes of an input band bounce buffer, or 0: on a storage level, an
    input box that is not whole rows of every channel is read as the band
    of its rows, every channel, once per row band (one transfer instead of
    one per row or pixel; the tiles cut their boxes from it in SRAM). A box
    of whole rows is one transfer already; a band of every row would be the
    whole tensor."""
    x = graph.tensor(layer.inputs[i])
    H, W, C = x.shape
    t = tiling.get("in_tile")
    if not tiling.get("tiled", True) or t is None or i >= tiling.get("n_inputs", 1) or t["h"] >= H \
            or (t["w"] >= W and t["c"] >= C):
        return 0
    return t["h"] * W * C * ir.DTYPES[x.dtype]


def _activation_buffers(graph, spilled=(), tilings=None, bands=False):
    """The buffers of the activation level: every tensor not spilled, and
    for each layer touching a spilled tensor, a bounce buffer per such
    input and output (one tile's bytes, live during that layer)."""
    producer = graph.producer()
    last = graph.last_use()
    buffers = []
    for name, t in sorted(graph.tensors.items()):
        if name in spilled:
            continue
        start = producer.get(name, 0) if name not in graph.inputs else 0
        end = last.get(name, start)
        buffers.append({"name": name, "size": t.nbytes, "start": start, "end": end})
    for step, layer in enumerate(graph.layers):
        if tilings is None:     # before tiling (predict_swapped): no bounce sizes yet
            break
        tile = tilings[layer.name]["l1_bytes"] if spilled else None
        # off a storage level (GAP8's L3 through its own DMA), a tiled layer's
        # bounce buffer has two slots: tile i + 1's read from the spill level,
        # and tile i - 1's write-back, run while tile i computes
        two = not bands and tilings[layer.name].get("buffering", 1) == 2
        for i, name in enumerate(layer.inputs):
            if name in spilled:
                band = in_band_bytes(layer, graph, tilings[layer.name], i) if bands else 0
                buffers.append({"name": bounce_name(layer.name, f"in{i}"), "start": step, "end": step,
                                **({"size": band, "band": 1} if band else _slots(tile["in"], two))})
        if layer.output in spilled:
            band = band_bytes(layer, graph, tilings[layer.name]) if bands else 0
            buffers.append({"name": bounce_name(layer.name, "out"), "start": step, "end": step,
                            **({"size": band, "band": 1} if band else _slots(tile["out"], two))})
    return buffers


def _slots(nbytes, two):
    """A bounce buffer's size, and with `two` its slot stride (two slots)."""
    return {"size": 2 * _align(nbytes), "slot": _align(nbytes)} if two else {"size": nbytes}


def bounce_name(layer_name, which):
    return f"{layer_name}:bounce:{which}"


def _activation_plan(graph, level, usable, tilings=None, spill=None, overlap=True, fused_pairs=(), bands=False,
                     direct=None, skip=(), keep=()):
    """Offsets of the activation level's buffers. When they cannot fit and
    a slower level can take activations (`spill`: GAP8's L3), the largest
    tensor live at the fullest step moves there, tile by tile through a
    bounce buffer, until the rest fits (never one in `keep`: the fused
    steps' inputs and outputs, which their kernels read and write in place). With `overlap`, a layer's output may
    start below its consumed input by the gap its tile order allows
    (tessera.planning.overlap; `skip`: outputs of fused steps, whose pairs come from
    their bands in fused_pairs, not from a single layer's tile table).
    Returns (plan, buffers, spilled)."""
    pairs = (overlap_candidates(graph, tilings, direct, skip) + list(fused_pairs)) if overlap and tilings else []
    steps = [layer.name for layer in graph.layers]
    spilled = []
    while True:
        buffers = _activation_buffers(graph, spilled, tilings, bands)
        mine = [p for p in pairs if p["below"] not in spilled and p["above"] not in spilled]
        try:
            return plan_level(level, usable, steps, buffers, align=ALIGN, overlaps=mine), buffers, spilled
        except FitError:
            name = _spill_candidate(graph, buffers, list(spilled) + list(keep)) if spill else None
            if name is None:
                raise
            spilled.append(name)


def _spill_candidate(graph, buffers, spilled):
    """The largest tensor live at the step with the most live bytes (never a
    network input or output: the application reads and writes those)."""
    live = {}
    for b in buffers:
        for step in range(b["start"], b["end"] + 1):
            live[step] = live.get(step, 0) + _align(b["size"])
    worst = max(live, key=lambda step: (live[step], -step))
    fixed = set(graph.inputs) | set(graph.outputs) | set(spilled)
    cands = [b for b in buffers if b["start"] <= worst <= b["end"] and b["name"] in graph.tensors
             and b["name"] not in fixed]
    return max(cands, key=lambda b: (b["size"], b["name"]))["name"] if cands else None


def _spill_arena(graph, spilled, level, base=0, align=8):
    """Offsets of the spilled tensors in their level (each its own place),
    from `base` (on a storage level: after the weights, block aligned)."""
    offsets, at = {}, base
    for name in spilled:
        offsets[name] = at
        at += _align(graph.tensor(name).nbytes, align)
    return {"level": level, "bytes": at, "base": base, "offsets": offsets}


def _weights_check(graph, level, size, usable, models_hint):
    total = 0
    per_layer = {}
    for layer in graph.layers:
        nbytes = weight_bytes(layer, graph)
        per_layer[layer.name] = nbytes
        total += nbytes
    if total > usable:
        running, where = 0, graph.layers[-1].name
        for layer in graph.layers:
            running += per_layer[layer.name]
            if running > usable:
                where = layer.name
                break
        room = (f"{_size(usable)} usable of {_size(size)}, {_size(size - usable)} reserved"
                if size > usable else _size(usable))
        raise FitError(level, f"{_size(total)} of weights do not fit ({room}); they overflow at layer {where}",
                       models_hint)
    return {"level": level, "bytes": total, "size": size, "usable": usable, "per_layer": per_layer}


def chunk_layout(layer, graph, channels):
    """Where the arrays of a chunk of `channels` output channels sit in a
    weight buffer: {array name: offset} (weights first, then the parameter
    arrays, each aligned) and the bytes it takes."""
    layout, at = {}, 0
    if layer.weights:
        layout["weights"] = at
        at += _align(ir.weight_bytes_per_cout(layer, graph) * channels)
    for name, _, size in param_arrays(layer):
        layout[name] = at
        at += _align(size * channels)
    return layout, at


def _activation_tops(graph, buffers, offsets):
    """Per layer, the highest address (aligned) the activations live then use."""
    top = [0] * len(graph.layers)
    for b in buffers:
        for step in range(b["start"], b["end"] + 1):
            top[step] = max(top[step], offsets[b["name"]] + _align(b["size"]))
    return top


def _weight_stream(graph, tilings, level, usable, act_buffers, act_offsets, only=None, runs=None):
    """The chunks every layer's constants stream through `level` in, and
    where each lands (see the module docstring).

    Chunk k is consumed while its layer runs and loaded while chunk k - 1 is
    consumed: at any time two are live. Even chunks sit just above the
    activations live over their lifetime, odd ones at the end of the usable
    bytes, so a pair never overlaps. A layer's chunks all have the same
    channel count: as many whole L1 channel tiles as fit half the room the
    activations leave from the previous to the next layer with weights (and
    what the neighbouring chunk leaves).

    runs: {layer index: the step whose function runs it} (a fused step's
    second layer runs in its first layer's function, which asks for both
    layers' chunks: the chunk after them starts loading there, while the
    step still reads its input)."""
    top = _activation_tops(graph, act_buffers, act_offsets)
    run = lambda i: (runs or {}).get(i, i)   # noqa: E731
    end = usable // 8 * 8
    weighted = [i for i, layer in enumerate(graph.layers) if (layer.weights or param_arrays(layer))
                and (only is None or layer.name in only)]
    chunks, per_layer = [], {}
    for w, layer_i in enumerate(weighted):
        layer, i = graph.layers[layer_i], run(layer_i)
        prev = run(weighted[w - 1]) if w else i
        nxt = run(weighted[w + 1]) if w + 1 < len(weighted) else i
        co = graph.tensor(layer.output).shape[2]
        tc = min(tilings[layer.name]["tile"]["c"], co)
        first_base = _align(max(top[prev:i + 1]), 8)    # an even first chunk: live from `prev` on
        room = end - _align(max(top[prev:nxt + 1]), 8)
        cap = room // 2
        if chunks:
            last = chunks[-1]
            if last["slot"] == 0:      # the previous chunk is low: this one goes high, above it
                cap = min(cap, end - (last["at"] + last["bytes"]))
            else:                      # the previous chunk is high: this one goes low, below it
                cap = min(cap, end - last["bytes"] - first_base)
        cap = cap // 8 * 8
        whole = chunk_layout(layer, graph, co)[1]
        n = co
        if whole > cap:
            n = (co // tc) * tc
            while n > tc and chunk_layout(layer, graph, n)[1] > cap:
                n -= tc
        # every chunk takes a whole chunk's bytes: the layer's code finds each
        # array at the same offset in all of its chunks, the last one included
        layout, nbytes = chunk_layout(layer, graph, n)
        if nbytes > cap:
            raise FitError(f"layer {layer.name}",
                           f"one L1 channel tile of its weights ({n} channels, {nbytes} bytes) does not fit "
                           f"the {max(cap, 0)} bytes {level} has for it beside the activations and the "
                           "neighbouring weight buffer",
                           f"lower the program's reservations in memory.{level} of the target YAML")
        per_layer[layer.name] = {"chunk_c": n, "first": len(chunks), "count": -(-co // n),
                                 "layout": layout, "bytes": whole}
        for c0 in range(0, co, n):
            k = len(chunks)
            lifetime = (chunks[-1]["step"] if chunks else i, i)
            at = _align(max(top[lifetime[0]:i + 1]), 8) if k % 2 == 0 else end - nbytes
            chunks.append({"layer": layer.name, "step": i, "c0": c0, "n": min(n, co - c0),
                           "slot": k % 2, "at": at, "bytes": nbytes})
    _check_stream(chunks, top, end)
    pairs = [a["bytes"] + b["bytes"] for a, b in zip(chunks, chunks[1:])] or [c["bytes"] for c in chunks]
    return {"level": level, "end": end, "peak": max(pairs, default=0), "chunks": chunks, "layers": per_layer}


def _split_on_card(graph, tilings, in_storage):
    """The layers with weights on the storage level whose reduction the
    tiler split: each gets `split` in its storage entry, what lays its
    constants out on the card in the order its steps use them
    (tessera.tiles.geometry.split_blocks: channel tile c, the chunks, the
    window). Returns their names."""
    names = set()
    for name, where in in_storage.items():
        tiling = tilings.get(name, {})
        if not tiling.get("split"):
            continue
        view = tiler_layer(graph.layer(name), graph)
        where["split"] = {"c": min(tiling["tile"]["c"], view["out"][2]), "window": w_per_k(view),
                          "chunks": [list(c) for c in chunks(view, tiling)]}
        names.add(name)
    return names


def _check_stream(chunks, top, end):
    """Every chunk inside the level, above the activations of its lifetime,
    apart from the chunk it is live with (a planner bug otherwise)."""
    for k, c in enumerate(chunks):
        start = chunks[k - 1]["step"] if k else c["step"]
        if c["at"] < max(top[start:c["step"] + 1]) or c["at"] + c["bytes"] > end:
            raise RuntimeError(f"memplan bug: weight chunk {k} ({c['layer']}) at {c['at']} overlaps")
        if k and c["at"] < chunks[k - 1]["at"] + chunks[k - 1]["bytes"] and \
                chunks[k - 1]["at"] < c["at"] + c["bytes"]:
            raise RuntimeError(f"memplan bug: weight chunks {k - 1} and {k} overlap")


def _size(n):
    """Bytes for a message, as every message and table writes them (tessera.util.units)."""
    from ..util.units import nbytes
    return nbytes(n)


def check_weights(graph, memory, fit_hint=""):
    """Raise FitError when the weights cannot fit their level (and no
    storage level takes the rest): known before any tiling, so a build can
    stop at once."""
    level = memory["place"]["weights"]
    lvl = memory["levels"][level]
    moved = storage_weights(graph, memory)
    _weights_check(_without_layers(graph, moved), level, lvl["size"], lvl["usable"], fit_hint)
    if moved:
        card = memory["storage"]["level"]
        need = max(v["at"] + v["bytes"] for v in moved.values())
        if need > memory["levels"][card]["usable"]:
            raise FitError(card, f"{_size(need)} of weights do not fit its {_size(memory['levels'][card]['usable'])}",
                           f"enlarge memory.{card}.size in the target YAML (the card has room, tessera plans "
                           "into `size` bytes of it)")


def storage_weights(graph, memory):
    """The layers whose weights live in the storage level (docs/out_of_core.md):
    every layer's when the target places weights there; else, when the
    weight level cannot hold them all, the largest layers' (fewest transfers,
    largest tiles), as few as needed. A layer with parameters but no weights
    stays. Returns {layer name: its storage layout} in network order:
    offset (block aligned), bytes, and each array's offset in it."""
    storage = memory.get("storage")
    if storage is None:
        return {}
    level = memory["place"]["weights"]
    sizes = {layer.name: weight_bytes(layer, graph) for layer in graph.layers if layer.weights}
    if level == storage["level"]:
        moved = set(sizes)
    else:
        usable = memory["levels"][level]["usable"]
        total = sum(weight_bytes(layer, graph) for layer in graph.layers)
        moved = set()
        for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
            if total <= usable:
                break
            moved.add(name)
            total -= sizes[name]
    out, at = {}, 0
    for layer in graph.layers:
        if layer.name in moved:
            co = graph.tensor(layer.output).shape[2]
            arrays, nbytes = chunk_layout(layer, graph, co)
            out[layer.name] = {"at": at, "bytes": nbytes, "arrays": arrays}
            at += _align(nbytes, storage["block"])
    return out


def predict_swapped(graph, memory):
    """The tensors the plan will likely move to a storage level, known
    before any tiling (bounce buffers and fragmentation left out): the
    choice _spill_candidate makes, on live bytes alone. The tiler gives the
    layers that touch them row-band tiles (docs/out_of_core.md); a tensor
    this misses is still swapped, through smaller transfers."""
    storage = memory.get("storage")
    if storage is None or memory.get("spill") != storage["level"]:
        return set()
    usable = memory["levels"][memory["place"]["activations"]]["usable"]
    spilled = []
    while True:
        buffers = _activation_buffers(graph, spilled)
        live = {}
        for b in buffers:
            for step in range(b["start"], b["end"] + 1):
                live[step] = live.get(step, 0) + _align(b["size"])
        if max(live.values(), default=0) <= usable:
            return set(spilled)
        name = _spill_candidate(graph, buffers, spilled)
        if name is None:
            return set(spilled)
        spilled.append(name)


def _without_layers(graph, names):
    """The graph without some layers' constants (they live in storage)."""
    from dataclasses import replace
    if not names:
        return graph
    return replace(graph, layers=[layer for layer in graph.layers if layer.name not in names])


def _without_intermediates(graph, fused, release_input=False):
    """The graph the activation level sees when fused steps run: each fused
    group's intermediate tensor is gone (it lives in L1 only), and the
    group's input and output are both live over all its layers (the step,
    run as its first layer's function, reads one while it writes the other;
    streamed weight chunks are placed around them). With release_input (for
    segment overlap, whose pairs share exactly the consumer's step) the
    input's life ends with the first layer, which runs the whole step: the
    second layer's function is empty, and the weight chunks it streams are
    placed above what is live from the first layer's step on."""
    from dataclasses import replace
    drop, changed = set(), {}
    for group in fused.values():
        members = [graph.layer(n) for n in group["layers"]]
        first, last = members[0], members[-1]
        inner = {m.output for m in members[:-1]}
        drop |= inner
        # an add epilogue's step reads the add's other input too
        changed[first.name] = replace(first, output=last.output,
                                      inputs=list(first.inputs) + [n for m in members[1:] for n in m.inputs
                                                                   if n not in inner])
        inputs = [last.output] if release_input else list(first.inputs) + [last.output]
        for m in members[1:]:
            changed[m.name] = replace(m, inputs=inputs, output=first.output)
    layers = [changed.get(layer.name, layer) for layer in graph.layers]
    return replace(graph, layers=layers, tensors={n: t for n, t in graph.tensors.items() if n not in drop})


def _fused_tensors(graph, fused):
    """The tensors fused steps read or write (first layer's inputs, second's
    output): a fused step has no bounce buffers, so none of them may spill."""
    out = set()
    for g in (fused or {}).values():
        members = [graph.layer(n) for n in g["layers"]]
        inner = {m.output for m in members[:-1]}
        out |= set(members[0].inputs) | {members[-1].output} | {n for m in members[1:] for n in m.inputs} - inner
    return out


def _fused_outputs(graph, fused):
    return {graph.layer(g["layers"][-1]).output for g in (fused or {}).values()}


def _fused_runs(graph, fused):
    """{later layer's index: first layer's index} of the fused steps."""
    index = {layer.name: i for i, layer in enumerate(graph.layers)}
    return {index[n]: index[g["layers"][0]] for g in (fused or {}).values() for n in g["layers"][1:]}


def plan(graph, tilings, memory, library_align=ALIGN, fit_hint="", fused=None, direct=None):
    """The network's plan. tilings: layer name -> the tiler's result;
    memory: tessera.config.views.memory_target(target); fused: group name ->
    {"layers": [dw, pw], "l1_total": bytes} for the fused steps the
    schedule runs (their intermediates take no place in the activation
    level); direct: layer name -> kind for the layers run in place
    (tessera.planning.inplace: only their scratch in the tile level). Raises
    FitError when a level cannot hold what it must."""
    direct = dict(sorted((direct or {}).items()))
    # an add epilogue's producer runs on the epilogue's own tiling (its skip buffer)
    tilings = dict(tilings)
    for g in (fused or {}).values():
        if g.get("kind") == "add":
            first = g["layers"][0]
            tilings[first] = dict(g["tiling"], layer=first, l1_budget=tilings[first].get("l1_budget"))
    place = memory["place"]
    levels = memory["levels"]
    act_level = place["activations"]
    spill = memory.get("spill")
    # segment overlap: single layers' tile tables and fused steps' bands
    # (their bands, when the schedule gives them; the replay below checks both)
    overlap = memory.get("overlap", True)
    bands = spill is not None and memory.get("storage", {}).get("level") == spill
    fused_pairs = fused_candidates(graph, fused) if fused and overlap and all(
        "bands" in g or "windows" in g for g in fused.values()) else []
    act_graph = _without_intermediates(graph, fused, bool(fused_pairs)) if fused else graph
    # a channel-major tensor (memory["chw"]: [pointwise, depthwise] pairs)
    # is written and read plane by plane, not in the row order the overlap
    # gaps follow: neither its producer's nor its reader's output overlaps
    chw = [graph.layer(pw).output for pw, _ in memory.get("chw", [])]
    apart = {graph.layer(n).output for pair in memory.get("chw", []) for n in pair}
    acts, act_buffers, spilled = _activation_plan(act_graph, act_level, levels[act_level]["usable"], tilings, spill,
                                                  overlap, fused_pairs, bands, direct,
                                                  skip=_fused_outputs(graph, fused) | apart,
                                                  keep=_fused_tensors(graph, fused))
    runs = _fused_runs(graph, fused)
    wl = place["weights"]
    in_storage = storage_weights(graph, memory)
    weights = _weights_check(_without_layers(graph, in_storage), wl, levels[wl]["size"], levels[wl]["usable"],
                             fit_hint)
    l1 = {name: (direct_mod.l1_layout(graph.layer(name), graph, direct[name], library_align) if name in direct
                 else l1_layout(t, align=library_align, layer=name)) for name, t in sorted(tilings.items())}
    tile_level = place["tiles"]
    l1_peak = max([lay["total"] for lay in l1.values()] + [g["l1_total"] for g in (fused or {}).values()],
                  default=0)
    if l1_peak > levels[tile_level]["usable"]:
        raise FitError(tile_level, f"tiles need {l1_peak} bytes but only {levels[tile_level]['usable']} "
                       "are usable", "enlarge the level in the target YAML")
    staging = memory.get("staging")
    if in_storage:
        # the storage layers' constants stream through the activation level
        st = memory["storage"]
        last = max(v["at"] + v["bytes"] for v in in_storage.values())
        split = _split_on_card(graph, tilings, in_storage)
        weights["storage"] = {"level": st["level"], "layers": in_storage, "bytes": _align(last, st["block"])}
        # the in-order stream walks each layer's channel tiles once: a split
        # layer's constants stream only through the out-of-core program, chunk
        # by chunk (tessera.storage.firmware), and a layer walked row band
        # first (`order: hcw`) reads its channel tiles' rows from the card
        # itself, again for every band (codegen.layer; so does the program)
        streamed = {name for name in in_storage if name not in split and not rows_first(tilings[name])}
        if streamed:
            weights["stream"] = _weight_stream(graph, tilings, act_level, levels[act_level]["usable"],
                                               act_buffers, acts["offsets"], only=streamed, runs=runs)
    elif staging is not None:
        if staging != act_level:
            raise FitError(staging, f"weights staged in {staging}, activations in {act_level}",
                           "stage weights in the activation level")
        weights["stream"] = _weight_stream(graph, tilings, staging, levels[staging]["usable"],
                                           act_buffers, acts["offsets"], runs=runs)
    activations = {"level": act_level, "arena": _align(acts["peak"]), "offsets": acts["offsets"],
                   "peak": acts["peak"], "lower_bound": acts["lower_bound"],
                   "overlap_bound": acts["overlap_bound"], "overlaps": acts["overlaps"],
                   "usable": levels[act_level]["usable"], "size": levels[act_level]["size"],
                   "method": acts["method"], "optimal": acts["optimal"]}
    if levels[act_level].get("reserved"):
        activations["reserved"] = levels[act_level]["reserved"]
    if chw:
        activations["chw"] = sorted(chw)
    if spilled:
        st = memory.get("storage")
        on_card = st is not None and st["level"] == spill
        base = weights["storage"]["bytes"] if on_card and "storage" in weights else 0
        activations["spill"] = _spill_arena(graph, spilled, spill, base, st["block"] if on_card else 8)
        activations["spill"]["bounces"] = {b["name"]: b["size"] for b in act_buffers
                                           if b["name"] not in graph.tensors}
        bands = sorted(b["name"] for b in act_buffers if b.get("band"))
        if bands:
            activations["spill"]["bands"] = bands
        slots = {b["name"]: b["slot"] for b in act_buffers if b.get("slot")}
        if slots:
            activations["spill"]["slots"] = slots
        room = levels[spill]["usable"] - (weights["bytes"] if wl == spill else 0)
        if activations["spill"]["bytes"] > room:
            raise FitError(spill, f"the activations moved there ({activations['spill']['bytes']} bytes) and the "
                           f"weights do not fit its {levels[spill]['usable']} usable bytes",
                           "use a smaller model or a target with more memory")
    the_plan = {
        "activations": activations,
        "weights": weights,
        "tiles": {"level": tile_level, "arena": _align(l1_peak), "usable": levels[tile_level]["usable"],
                  "size": levels[tile_level]["size"], "layers": l1},
    }
    if levels[tile_level].get("reserved"):
        the_plan["tiles"]["reserved"] = levels[tile_level]["reserved"]
    if direct:
        the_plan["direct"] = direct
    # the proof: the generated schedule replayed over these addresses
    if not fused or all("bands" in g or "windows" in g for g in fused.values()):
        hazard.check(graph, tilings, the_plan, fused)
    return the_plan


def layer_slice(the_plan, layer):
    """What one layer's generated code needs of the plan."""
    offsets = the_plan["activations"]["offsets"]
    spill = the_plan["activations"].get("spill", {"offsets": {}})["offsets"]
    out = {
        "layer": layer.name,
        # a spilled tensor is not in the activation level (see "spill")
        "inputs": [offsets.get(name) for name in layer.inputs],
        "output": offsets.get(layer.output),
        # the budget is the level's, not the layer's: leave it out so a new
        # L1 size only touches layers whose layout really moved
        "l1": {k: v for k, v in the_plan["tiles"]["layers"][layer.name].items() if k != "budget"},
    }
    if layer.name in the_plan.get("direct", {}):
        out["direct"] = the_plan["direct"][layer.name]
    chw = the_plan["activations"].get("chw", [])
    if layer.output in chw:
        out["chw_out"] = 1
    if layer.inputs and layer.inputs[0] in chw:
        out["chw_in"] = 1
    stream = the_plan["weights"].get("stream")
    card = the_plan["weights"].get("storage", {"layers": {}})["layers"].get(layer.name)
    if stream is not None and layer.name in stream["layers"]:
        mine = stream["layers"][layer.name]
        out["wstream"] = {"chunk_c": mine["chunk_c"], "layout": mine["layout"]}
    elif card is not None and "split" not in card:
        # its constants on the card outside the in-order stream: each
        # array's offset there (a split layer's follow its steps instead)
        out["card_weights"] = {k: card["at"] + v for k, v in sorted(card["arrays"].items())}
    moved = {f"in{i}": name for i, name in enumerate(layer.inputs) if name in spill}
    if layer.output in spill:
        moved["out"] = layer.output
    if moved:
        # tensors in the spill level: where, and the bounce buffer a tile passes through
        out["spill"] = {which: {"at": spill[name], "bounce": offsets[bounce_name(layer.name, which)]}
                        for which, name in moved.items()}
        for which in moved:
            if bounce_name(layer.name, which) in the_plan["activations"]["spill"].get("bands", ()):
                out["spill"][which]["band"] = 1
        for which in moved:
            slot = the_plan["activations"]["spill"].get("slots", {}).get(bounce_name(layer.name, which))
            if slot:
                out["spill"][which]["slot"] = slot
    return out


def memory_report(the_plan, arena=None):
    """Per level: peak, lower bound and size, as report.json shows them.
    lower_bound: no plan of these buffers can do better (with the allowed
    overlaps); tensor_bound: the largest set of whole tensors live at once
    (what a plan without overlap cannot beat). arena (targets with a
    storage level; None elsewhere): the bytes network.c declares for the activation level
    at least (tessera.storage.firmware.declared_arena: the usable bytes when
    the out-of-core program's pools take the free ones, else 0); `ram`
    counts what network.c declares (this, the weight stream's end or the
    peak), `declared` says it when past the peak, and `pools` the bytes past
    the peak the program's pools may take (the in-order firmware's weight
    chunks when it falls back)."""
    acts, w, tiles = the_plan["activations"], the_plan["weights"], the_plan["tiles"]
    out = {acts["level"]: {"peak": acts["peak"], "lower_bound": acts.get("overlap_bound", acts["lower_bound"]),
                           "tensor_bound": acts["lower_bound"], "overlaps": acts.get("overlaps", 0),
                           "size": acts["size"], "usable": acts["usable"], "holds": "activations"}}
    stream = w.get("stream")
    if stream is not None:
        out[stream["level"]]["holds"] = "activations, weight buffers"
        out[stream["level"]]["weight_buffers_peak"] = stream["peak"]
    out.setdefault(w["level"], {"peak": w["bytes"], "lower_bound": w["bytes"], "tensor_bound": w["bytes"],
                                "size": w["size"],
                                "usable": w["usable"], "holds": "weights"})
    spill = acts.get("spill")
    if spill is not None and spill["level"] in out:
        out[spill["level"]]["holds"] += ", spilled activations"
        out[spill["level"]]["peak"] += spill["bytes"]
        out[spill["level"]]["lower_bound"] += spill["bytes"]
        out[spill["level"]]["tensor_bound"] += spill["bytes"]
        out[spill["level"]]["spilled_activations"] = spill["bytes"]
    l1_lb = max((lay["total"] for lay in tiles["layers"].values()), default=0)
    out.setdefault(tiles["level"], {"peak": tiles["arena"], "lower_bound": l1_lb, "tensor_bound": l1_lb,
                                    "size": tiles["size"],
                                    "usable": tiles["usable"], "holds": "tiles"})
    direct = the_plan.get("direct", {})
    if direct and tiles["level"] in out:
        # layers run in place keep only their kernel scratch here
        out[tiles["level"]]["holds"] = f"tiles and scratch ({len(direct)} of {len(tiles['layers'])} layers in place)"
        out[tiles["level"]]["in_place"] = len(direct)
    # the RAM the firmware takes in each level it writes at run time: what
    # the plan places there (peak) plus what the target YAML reserves there
    # (stacks, the C runtime's data, code run from RAM)
    for m in out.values():
        if "activations" in m["holds"] or "tiles" in m["holds"]:
            m["reserved"] = m["size"] - m["usable"]
            m["ram"] = m["peak"] + m["reserved"]
    mine = out[acts["level"]]
    if "reserved" in mine:
        # network.c declares the larger of the plan's arena, the weight
        # stream's end (its chunk buffers) and the storage program's arena
        # (codegen.network.declared): the firmware takes it all
        ends = [mine["peak"], arena or 0] + ([stream["end"]] if stream is not None
                                             and stream["level"] == acts["level"] else [])
        if max(ends) > mine["peak"]:
            mine["declared"] = max(ends)
            mine["ram"] = max(ends) + mine["reserved"]
            if arena:
                mine["pools"] = max(ends) - mine["peak"]
    # what the reserved bytes are for (the target YAML's names: stack, data, code)
    for part in (acts, tiles):
        if part.get("reserved") and part["level"] in out:
            out[part["level"]]["reserved_for"] = dict(part["reserved"])
    return out
