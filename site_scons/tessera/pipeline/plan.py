"""The memory plan: memplan.json and each layer's slice of it
(tessera.planning), proven by the hazard replay before any code exists.

memory() is the planner's view of the target with the build's choices:
segment-level overlap or not, which layers may run in place (the target's
`direct:` policy, direct=0 off) and, with a cap, the RAM it must fit;
layer_views() the plan's wishes for the tiler: which layers are cut in
row bands (row_bands) and which write a storage-level tile.
"""

from ..config import views
from ..cost import chw
from ..errors import TesseraError
from ..planning import inplace, memplan, overlap, rambudget


def row_bands(graph, overlap_on):
    """The layers the tiler cuts in row bands: with overlap (segment-level
    planning), those at the activation peak (overlap.row_band_layers)."""
    return set(overlap.row_band_layers(graph)) if overlap_on else set()


def layer_views(graph, tcfg, rows):
    """{layer: its tiler view} with the plan's wishes: `rows` (row bands)
    for the layers in `rows` and for those touching a tensor that will live
    on a storage level; `storage_out` for a layer writing such a tensor:
    it gathers its output in row bands of every channel and writes each
    once (a storage-level tile; weights on the card are read again for
    every band, outside the in-order weight stream)."""
    memory = views.memory_target(tcfg)
    swapped = memplan.predict_swapped(graph, memory)
    stored = memplan.storage_weights(graph, memory) if swapped else {}
    # the SRAM a band of a tensor on the card may take in the program's pools
    # (storage.firmware: the in and out pools as large as the largest band,
    # the w pool the rest, beside the tensors the plan keeps)
    usable = memory["levels"][memory["place"]["activations"]]["usable"] if swapped else 0
    band_in = band_out = usable // BAND_SHARE
    out = {}
    for layer in graph.layers:
        view = views.tiler_layer(layer, graph)
        if layer.name in rows or (swapped & set(layer.inputs + [layer.output]) and not view.get("whole")):
            view["rows"] = 1
        if layer.output in swapped and not view.get("whole"):
            view["storage_out"] = 1
        if not view.get("whole") and layer.inputs and layer.inputs[0] in swapped \
                and _band_large(graph, layer.inputs[0], band_in):
            view["band_in"] = band_in
        if view.get("storage_out") and _band_large(graph, layer.output, band_out):
            view["band_out"] = band_out
            if layer.name in stored:
                # its weights on the card too: read again for every band
                view["band_weights"] = 1
        out[layer.name] = view
    return out


# a band of a tensor on the card takes at most usable // BAND_SHARE bytes of
# the activation level: the program's pools hold an in and an out band and
# the w pool beside them (vgg16_224: 3x3 convolutions over 28x28x512 read
# 4-row bands of 57 kB). Smaller written bands let the plan keep more tensors
# in SRAM, whose bytes the pools then lack (vgg16_224 with usable // 8:
# pool7's output, leaving conv8 57 kB for all three pools)
BAND_SHARE = 4


def _band_large(graph, name, budget):
    """True when the whole tensor exceeds the band budget (a smaller one
    never needs the bound: left out, its layer's view and tiling stay as
    they were)."""
    return graph.tensor(name).nbytes > budget


def kernel_functions(graph, kernels):
    """{layer: the C function its kernel library calls for it} for the
    layers that may run in place (planning.inplace.candidates): the code
    generator decides it; the planner reads it as data."""
    names = inplace.candidates(graph, kernels)
    if not names:
        return {}
    from ..codegen.libraries import library

    lib = library(kernels)
    return {n: lib.kernel_function(graph.layer(n), graph=graph) for n in names}


# the producers whose kernel has a channel-major twin (<kernel>_chw): the
# pointwise and the convolution (a network's first, 3x3 on 3 channels)
CHW_PRODUCERS = {"pointwise": "pnn_pointwise", "conv2d": "pnn_conv2d"}


def chw_pairs(graph, tcfg):
    """[[producer, depthwise]] whose tensor between may be written
    channel-major (docs/gvsoc.md, "Depthwise, session 10" and "First
    convolution channel-major"): pulp_nn's Xpulp path (pnn_pointwise_chw or
    pnn_conv2d_chw, pnn_depthwise_chw), a pointwise or convolution whose
    int8 output's only reader is a 3x3 depthwise on its own kernel, not a
    network output; a convolution's channels a multiple of 4 (its Xpulp
    blocks: the rest runs the direct loop). What the schedule and the tiles
    allow is plan()'s (chw_chosen)."""
    if tcfg["kernels"] != "pulp_nn" or "xpulpv2" not in tcfg.get("toolchain", {}).get("isa", []):
        return []
    from ..codegen.libraries import library

    lib = library(tcfg["kernels"])
    readers = graph.readers()
    out = []
    for pw in graph.layers:
        users = [graph.layers[i] for i in readers.get(pw.output, [])]
        if (pw.op not in CHW_PRODUCERS or len(users) != 1 or pw.output in graph.outputs or pw.requant is None
                or (pw.op == "conv2d" and graph.tensor(pw.output).shape[-1] % 4)):
            continue
        dw = users[0]
        if (dw.op != "depthwise" or dw.inputs != [pw.output] or list(dw.kernel) != [3, 3] or dw.dilation
                or graph.tensor(pw.output).dtype != "int8" or len(graph.tensor(pw.output).shape) != 3):
            continue
        if (lib.kernel_function(pw, graph=graph), lib.kernel_function(dw, graph=graph)) == (
                CHW_PRODUCERS[pw.op], "pnn_depthwise"):
            out.append([pw.name, dw.name])
    return out


def chw_price(graph, pairs, tcfg, library):
    """What the plan and the tiler weigh a channel-major pair by
    (tessera.cost.chw): the library's cycles a DMA command, the commands a
    box takes for free, and each pair's depthwise gain, {"command": cycles,
    "queue": commands, "gain": {depthwise: cycles}}; "queue_of":
    {depthwise: commands} where the producer's op has a queue of its own
    (library.yaml chw.queue_after)."""
    price = library.get("chw", {})
    gains = {dw: chw.gain(graph.tensor(graph.layer(dw).output).shape, graph.layer(dw).stride[0],
                          tcfg.get("cores", 1), price) for _, dw in pairs}
    out = {"command": price.get("command", 0), "queue": price.get("queue", 0), "gain": gains}
    own = price.get("queue_after", {})
    queue_of = {dw: own[graph.layer(pw).op] for pw, dw in pairs if graph.layer(pw).op in own}
    if queue_of:
        out["queue_of"] = queue_of
    return out


def _pair_price(price, dw):
    """The pair's {gain, command, queue} (chw_price's)."""
    return {"gain": price["gain"][dw], "command": price["command"],
            "queue": price.get("queue_of", {}).get(dw, price["queue"])}


def chw_views(views, memory):
    """The tiler's views with each channel-major pair's price: the
    producer's `chw_out`, the depthwise's `chw_in` ({gain, command, queue}), so
    that their tiles weigh the boxes' DMA commands against the depthwise's
    gain (tiler/costed.py); a convolution producer also `rows` (whole-row
    bands of every channel: docs/gvsoc.md, "First convolution
    channel-major"). Views of other layers are as they were."""
    price = memory.get("chw_price")
    if not price:
        return views
    out = dict(views)
    for pw, dw in memory["chw_pairs"]:
        p = _pair_price(price, dw)
        out[pw] = dict(out[pw], chw_out=p)
        if out[pw]["op"] == "conv2d":
            # mbv1_025_128's conv0 channel-major in 15x64x8 bands: 186,554
            # cycles, in the 64x20x8 columns the cost model prefers: 194,282
            # (HWC columns: 191,678); its boxes one DMA command each
            out[pw]["rows"] = 1
        out[dw] = dict(out[dw], chw_in=p)
    return out


def chw_chosen(pairs, sched, tilings, graph, price):
    """The pairs of chw_pairs both of whose layers run alone (not fused,
    through L1 tiles: codegen.layer) and whose tiles make it pay
    (tessera.cost.chw.pair_net: the depthwise's gain against the boxes'
    extra DMA commands), most saving first, then in network order.
    sched: the schedule, None without fusion; price: chw_price's."""
    if sched is None:      # fusion=none: every layer its own step
        alone = {layer.name for layer in graph.layers}
    else:
        alone = {n for st in sched["steps"] if st["kind"] == "layer" for n in st["layers"]}
    order = {layer.name: i for i, layer in enumerate(graph.layers)}
    paying = []
    for pw, dw in pairs:
        tp, td = tilings.get(pw), tilings.get(dw)
        # (a split reduction's step stores HWC: codegen.split)
        if pw not in alone or dw not in alone or tp is None or td is None or tp.get("split"):
            continue
        d = graph.layer(dw)
        net = chw.pair_net(tp, td, graph.tensor(graph.layer(pw).output).shape, graph.tensor(d.inputs[0]).shape,
                           graph.tensor(d.output).shape, price["gain"][dw], _pair_price(price, dw))
        if net > 0:
            paying.append((-net, order[pw], [pw, dw]))
    return [p for _, _, p in sorted(paying)]


def chw_fitting(paying, plan_for):
    """The paying pairs (chw_chosen's order) the activation level still
    holds: first each that does not raise the plan's peak, then, where the
    level has room, the others (a channel-major tensor gives up the overlap
    of its pair: mbv1_128's pw1 -> dw2 raises the peak from 262,144 to
    393,216 bytes). plan_for(pairs): the memory plan with them (raises
    TesseraError when a level cannot hold it)."""
    if not paying:
        return []

    def holds(pairs):
        try:
            p = plan_for(pairs)
        except TesseraError:
            return None
        # a tensor moved out of the activation level (spilled) is not held
        return None if p["activations"].get("spill", {}).get("offsets") else p["activations"]["peak"]

    peak = holds([])
    if peak is None:
        return []
    kept, rest = [], []
    for pair in paying:
        got = holds(kept + [pair])
        (kept if got is not None and got <= peak else rest).append(pair)
    for pair in rest:
        if holds(kept + [pair]) is not None:
            kept.append(pair)
    return kept


def direct_policy(tcfg, library, direct_on, upstream_given):
    """The in-place policy: the target's (none, flat, ram_cap), none with
    direct=0, and none when the kernel library is an upstream checkout given
    on the command line (cmsis_nn=<path>: planning.inplace models this
    checkout's kernels' loop orders, not another's)."""
    policy = tcfg.get("direct", "none")
    if library.get("build", {}).get("upstream") and upstream_given:
        return "none"
    return policy if direct_on else "none"


def upstream_variable(library):
    """The command-line variable naming an upstream checkout of the kernel
    library (kernels/<library>/library.yaml: build.upstream), or None."""
    up = library.get("build", {}).get("upstream")
    return up["variable"] if up else None


def memory(graph, tcfg, library, overlap_on, policy, rows, fit_hint, cap=None, where=None, chw_on=False):
    """The memory plan's view: the target's levels (config.views), the
    kernel library's buffer alignment, overlap, the layers in place under
    `policy` (none on a target that stages weights, spills activations or
    has a storage level; a layer only where its kernel's scratch fits the
    tile level; `rows`: those cut in row bands, whose depthwise calls go row
    by row) and the cap."""
    out = views.memory_target(tcfg)
    out["align"] = library["tiler"].get("buffer_align", 4)
    out["fit_hint"] = fit_hint
    out["overlap"] = overlap_on
    if policy != "none" and not any(k in out for k in ("staging", "spill", "storage")):
        room = out["levels"][out["place"]["tiles"]]["usable"]
        eligible = inplace.eligible(graph, kernel_functions(graph, tcfg["kernels"]), rows)
        out["direct"] = {"policy": policy, "eligible": {
            n: k for n, k in eligible.items() if inplace.scratch_bytes(graph.layer(n), graph, k) <= room}}
    if cap is not None:
        out["ram_cap"] = cap
        out["where"] = where
    # channel-major pointwise -> depthwise tensors: not with a cap (the
    # budget step plans without them); without pairs the view is as it was
    pairs = chw_pairs(graph, tcfg) if chw_on and cap is None else []
    if pairs:
        out["chw_pairs"] = pairs
        out["chw_price"] = chw_price(graph, pairs, tcfg, library)
    return out


def plan(graph, view, docs):
    """(memplan.json, [each layer's slice]) from the memory view and, in
    any order, the layers' tilings, the fused steps' tilings, the schedule
    and ram_budget.json."""
    budget = view["levels"][view["place"]["tiles"]]["usable"]
    tilings, fused_tilings, sched, chosen = {}, {}, None, None
    for t in docs:
        if "ram_cap" in t:
            chosen = t          # ram_budget.json: the layers a cap runs in place
        elif "steps" in t:
            sched = t
        elif "group" in t:
            fused_tilings[t["group"]] = t
        else:
            tilings[t["layer"]] = dict(t, l1_budget=budget)
    # a fused step's bands (either kind) let its output overlap its input
    # (memplan, checked by the replay, weight stream included); its layers
    # run fused, not in place (rambudget.with_fused, as the budget step did)
    fused, view = rambudget.with_fused(view, sched, fused_tilings, graph)
    # layers in place: a flat tile level takes them where they lower total
    # RAM; a faster one where ram_budget needed them
    policy = view.get("direct", {}).get("policy", "none")
    eligible = view.get("direct", {}).get("eligible", {})
    # the layers in place the budget step chose (none without it)
    mine = {n: eligible[n] for n in (chosen or {}).get("direct", []) if n in eligible}
    if view.get("chw_pairs"):
        # (a layer that may run in place reads and writes HWC buffers: not those)
        paying = [p for p in chw_chosen(view["chw_pairs"], sched, tilings, graph, view["chw_price"])
                  if not set(p) & set(eligible)]
        direct = {} if policy == "flat" else mine
        view = dict(view, chw=chw_fitting(
            paying, lambda pairs: memplan.plan(graph, tilings, dict(view, chw=pairs), view["align"],
                                               view["fit_hint"], fused, direct)))

    tried = []     # each set of layers in place the decision planned, for the report

    def plan_with(direct):
        try:
            p = memplan.plan(graph, tilings, view, view["align"], view["fit_hint"], fused, direct)
        except TesseraError as err:
            tried.append({"in_place": dict(sorted(direct.items())), "fits": str(err)})
            raise
        tried.append({"in_place": dict(sorted(direct.items())), "ram": rambudget.total_ram(memplan.memory_report(p))})
        return p
    if policy == "flat":
        the_plan = rambudget.plan_flat(graph, tilings, view, plan_with, view.get("ram_cap"))
    else:
        the_plan = plan_with(mine)
        moved = the_plan["activations"].get("spill", {}).get("offsets", {})
        if set(the_plan["activations"].get("chw", [])) & set(moved):
            # a channel-major tensor moved out of the activation level: its
            # boxes there are HWC ones (codegen.layer); plan without them
            view = dict(view, chw=[])
            the_plan = plan_with(mine)
    if eligible:
        the_plan["in_place_decision"] = {"policy": policy, "eligible": dict(sorted(eligible.items())),
                                          "options": tried}
    if view.get("ram_cap") is not None:
        # ram_budget judged this very plan; a difference is a bug there
        ram = rambudget.total_ram(memplan.memory_report(the_plan))
        if ram > view["ram_cap"] or ram != chosen["ram"]:
            raise TesseraError(view.get("where", "ram_cap"),
                               f"the firmware needs {ram} bytes of RAM where the tile budget step counted "
                               f"{chosen['ram']} (ram_cap {view['ram_cap']})",
                               "a bug: the budget step must plan as the build does (tessera.planning.rambudget)")
    return the_plan, [memplan.layer_slice(the_plan, layer) for layer in graph.layers]
