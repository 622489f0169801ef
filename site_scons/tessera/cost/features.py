"""What a layer does, from the IR and its tiling alone (no run): the
quantities the cost model's coefficients multiply.

    macs       multiply-accumulates (ir.macs)
    out_elems  output elements (requantization, stores)
    in_elems   input elements of every input (loads, padding, im2col)
    split_macs MACs as the slowest core does them times the cores: per tile
               the MACs scaled by the largest core share times the cores, the
               share as the kernels split (_split: output pixels in pairs or
               channels in fours, whichever is more even, for conv2d and
               pointwise; pixels or channels for pools; channels for depthwise
               and linear); equal to macs on one core or an even split
    tiles      tiles the layer runs as (per-tile overhead: DMA programming,
               forking the cores, the kernel call); a split tiling's steps
    im2col     conv2d: bytes its kernels unroll into im2col rows, per tile the
               output pixels times kh*kw*C_in (the first layers' 1 or 3 input
               channels make this, not the MACs, their cost); like wsum, as
               the slowest core does them times the cores (split by
               channels, every core unrolls every pixel)
    taps       conv2d: output pixels times kh*kw per tile, the im2col copies
               (one per window tap, whatever C_in: with 1 or 3 input
               channels the per-copy overhead dominates)
    wsum       conv2d: per tile, the weights a core sums before its
               pixels (kh*kw*C_in per channel it computes, to fold the input
               offset into the bias): with a pixel split every core walks all
               of the tile's channels, which on a 4x4 map costs more than the
               MACs
    plain_macs pointwise: the MACs when the input offset is neither 0 nor
               128 (the input's zero point is not 0 or -128: after an add,
               a layer without ReLU, the network input) or the input channels
               are not a multiple of 4: pulp_nn's SIMD pointwise path takes
               neither, the plain C loop runs about 3x slower
    row_chans  depthwise run in place a band of rows per call (the memory
               plan's direct "depthwise_rows", least RAM): calls times
               channels, each call's per-channel setup (about 330
               instructions per channel per call on stm32f4, against tens
               for a whole layer's channel; set by plan_features, 0 without
               a plan)
    acc_elems  (only in a split tiling's features: the reports of unsplit
               layers stay as they were) a split tiling (codegen/split.py: the reduction in
               chunks): the 32-bit partial sums stored after a chunk and
               reloaded by the next, the output tile's elements once per
               chunk but the last (the extra passes)
    tail_macs  MACs of output channels outside whole groups of 4 per tile
               (conv2d, pointwise, linear: the kernels' register blocks are
               4 channels wide; the rest runs a slower leftover loop)
    chans      output channels summed over tiles (per-channel setup: a
               depthwise kernel's im2col stripe, a pool's window pass)
    gathered, plane_rows, core_chans
               depthwise (kh*kw > 1): per tile, as the busiest core does
               them times the cores (pulp_nn splits a tile's channels over
               the cores, each channel's plane gathered out of the HWC tile
               and then computed row by row): the input bytes it gathers
               (the tile's input box, halo rows and columns included: a band
               gathers them again), the rows of its planes (the gather's
               input rows and the output loops' rows), its channels (each
               channel's set-up; 51 channels on 8 cores: 7 for the busiest)
    pair_outs  (only on several cores) depthwise (kh*kw > 1): per tile, as the busiest core does
               them times the cores, the outputs the kernel computes a row
               at a time (in pairs), not in its 2x2 blocks (DW_QUADS: stride
               1, an even tile width, planes of 64 outputs or more, the rows
               two at a time; an odd last row in pairs): stride 2, odd
               widths (a column tile 35 wide), small planes
    rows       softmax, layernorm: the rows they normalize (pixels: a
               token's features, a row of attention scores), each with its
               own maximum and sum, reciprocal or square root
    act_bytes, act_xfers   activation bytes moved between the activation
               level and the tile level, and the DMA transfers that move them
    w_bytes, w_xfers       weight and parameter bytes moved to the tile level
               (once per channel tile), and their transfers
    stream_bytes, stream_xfers   weight bytes streamed into the staging level
               (GAP8: L3 -> L2 by the I/O DMA) while the layer runs, and
               their transfers: from the memory plan's weight stream, not
               the tiling (0 without a plan; plan_features, which also
               zeroes the DMA of layers run in place). A layer taking chunk k starts
               chunk k + 1, often the next layer's: a linear layer before
               a big one pays for that one's weights (stream_features)

Transfers follow the engine's dimensions: an HWC box whose rows are whole
(full width and channels) is one contiguous block; otherwise a 2D engine
moves it as one transfer per row band and a 1D engine as one per row of
contiguous bytes.
"""

from .. import ir
from ..config import views
from ..tiles import geometry

FEATURES = ("macs", "split_macs", "out_elems", "in_elems", "tiles", "im2col", "taps", "wsum", "plain_macs",
            "row_chans", "tail_macs", "chans", "rows", "gathered", "plane_rows", "core_chans",
            "act_bytes", "act_xfers", "w_bytes", "w_xfers", "stream_bytes", "stream_xfers")
# features only some layers' reports have (the others' stay as they were): a
# depthwise on several cores (pulp_nn's multi-core kernel) its pair_outs
OPTIONAL = ("pair_outs",)
BLOCKED = ("conv2d", "pointwise", "linear")     # ops whose kernels block output channels by 4
ROW_OPS = ("softmax", "layernorm")              # ops with a per-row setup (feature rows)


def _box_xfers(shape, box, dims):
    """Transfers to move an HWC box out of an HWC tensor of `shape`."""
    H, W, C = shape
    h, w, c = box
    if c == C and w == W:
        return 1                    # one contiguous block
    if c == C or dims >= 3:
        return 1 if dims >= 2 else h          # rows of w*C contiguous bytes
    return h if dims >= 2 else h * w          # each pixel's channel slice


def _balance(units, cores):
    return -(-units // cores) * cores / units if units else 1.0


def _chunk(n, quantum, cores):
    """The largest share of n units split over cores in chunks of quantum."""
    per = -(-n // cores)
    return min(-(-per // quantum) * quantum, n)


def _split(op, oh, ow, oc, cores):
    """(largest core share of a tile's work times the cores, that core's
    output channels, its output pixels): the kernels' split
    (kernels/pulp_nn/pnn_common.h pnn_split, pnn_chunk); one core:
    (1, oc, pixels)."""
    pixels = oh * ow
    if cores <= 1 or not pixels or not oc:
        return 1.0, oc, pixels
    if op in ("depthwise", "linear"):
        per_c = _chunk(oc, 4 if op == "linear" else 1, cores)
        return per_c * cores / oc, per_c, pixels
    if op == "add":
        return _chunk(pixels * oc, 1, cores) * cores / (pixels * oc), oc, pixels
    pq, cq = (2, 4) if op in BLOCKED else (1, 4) if op in ("maxpool", "avgpool") else (1, 1)
    per_p, per_c = _chunk(pixels, pq, cores), _chunk(oc, cq, cores)
    # (on a tie the Xpulp pointwise splits the channels: the same share)
    if per_p * oc <= pixels * per_c:
        return per_p * cores / pixels, oc, per_p
    return per_c * cores / oc, per_c, pixels


def _per_tile(feats, op, view, tile, oshape, tile_macs, cores=1, in_c=None, in_hw=None):
    """Add one tile's im2col, taps, wsum, tail_macs, chans and a
    depthwise's gathered, plane_rows and core_chans (in_c: the input
    channels the tile reads, a split step's chunk; in_hw: the rows and
    columns of its input box, else those its windows span)."""
    oc = tile[-1] if tile else 1
    pixels = tile[0] * tile[1] if len(tile) >= 3 else 1
    feats["chans"] += oc
    in_c = in_c or view["in"][-1]
    kh, kw = view.get("kernel", (1, 1))
    if op == "depthwise" and kh * kw > 1 and len(tile) >= 3:
        (sh, sw), (H, W) = view.get("stride", (1, 1)), view["in"][:2]
        ih, iw = in_hw or (min((tile[0] - 1) * sh + kh, H), min((tile[1] - 1) * sw + kw, W))
        # the busiest core's channels, each gathered and computed alone
        core_c = _split(op, tile[0], tile[1], oc, cores)[1] * cores
        feats["gathered"] += core_c * ih * iw
        feats["plane_rows"] += core_c * (ih + tile[0])
        feats["core_chans"] += core_c
        if cores > 1:
            oh, ow = tile[0], tile[1]
            quads = 2 * (oh // 2) * ow if (sh, sw) == (1, 1) and ow % 2 == 0 and oh * ow >= 64 else 0
            feats["pair_outs"] = feats.get("pair_outs", 0) + core_c * (oh * ow - quads)
    if op == "conv2d":
        # im2col and wsum as the slowest core does them, times the cores: a
        # core unrolls the windows of its own pixels (all of them when the
        # split is by channels) and sums the weights of its own channels (all
        # of them when the split is by pixels)
        _, core_c, core_p = _split(op, tile[0], tile[1], oc, cores)
        feats["im2col"] += core_p * cores * kh * kw * in_c
        feats["taps"] += pixels * kh * kw
        feats["wsum"] += core_c * cores * kh * kw * in_c
    if op in BLOCKED and oc % 4:
        feats["tail_macs"] += round(tile_macs * (oc % 4) / oc)


def _plain_macs(op, macs, input_offset, in_c):
    return macs if op == "pointwise" and (input_offset not in (0, 128) or in_c % 4) else 0


def recurrent_features(layer, graph, tiling, cores=1):
    """The features of a recurrent layer (op lstm, TFLite's integer cell):
    macs the gate matrices' (and projection's) over the sequence,
    split_macs as the busiest core does them times the cores (the cells
    split one at a time), out_elems the 16-bit logistic and tanh evaluations
    (five per cell and step, four without input gate), chans the same as
    the busiest core does them times the cores, tiles the forks (one per
    step, two with a projection); the sequences and the constants as DMA.
    A cell of plain ops is priced op by op (body_features)."""
    rnn = layer.rnn
    x, y = graph.tensor(layer.inputs[0]), graph.tensor(layer.output)
    feats = dict.fromkeys(FEATURES, 0)
    feats["macs"] = ir.macs(layer, graph)
    feats["act_bytes"], feats["act_xfers"] = x.nbytes + y.nbytes, 2
    stream = tiling.get("stream")
    streamed = 0
    if rnn["cell"] == "ops":
        for k in (stream or {}).get("ops", ()):
            streamed += rnn["layout"][rnn["body"][k]["weights"]][1]
        feats["tiles"] = rnn["steps"] * len(rnn["body"])
    else:
        nc = rnn["n_cell"]
        share = _chunk(nc, 1, cores) * cores / nc
        feats["split_macs"] = round(feats["macs"] * share)
        # the activations a cell evaluates a step (ONNX's cells: the 32-bit forms)
        per_cell = {"onnx_lstm": 5, "onnx_gru": 3}.get(rnn["cell"], 4 if rnn.get("gates") == "fgo" else 5)
        feats["out_elems"] = rnn["steps"] * nc * per_cell
        feats["chans"] = round(feats["out_elems"] * share)
        feats["in_elems"] = x.size
        feats["tiles"] = rnn["steps"] * (2 if rnn.get("projection") else 1)
    feats["w_bytes"] = rnn["bytes"] - streamed + rnn["steps"] * streamed
    feats["w_xfers"] = 1 + rnn["steps"] * sum(-(-rnn["body"][k]["n"] // stream["rows"])
                                              for k in (stream or {}).get("ops", ()))
    return feats


def body_features(op, rnn, cores=1):
    """(IR op, features) of one body op of a cell of plain ops at one step:
    a layer on whole vectors, priced with that op's own coefficients."""
    feats = dict.fromkeys(FEATURES, 0)
    n = op["n"]
    k = rnn["layout"][op["weights"]][1] // n if op["op"] == "linear" else 1
    feats["macs"] = n * k
    feats["split_macs"] = round(feats["macs"] * _split(op["op"], 1, 1, n, cores)[0])
    feats["out_elems"] = n
    feats["in_elems"] = k if op["op"] == "linear" else n * len(op["in"])
    feats["tiles"] = 1
    feats["chans"] = n
    if op["op"] == "linear" and n % 4:
        feats["tail_macs"] = (n % 4) * k
    return op["op"], feats


def layer_features(layer, graph, tiling, dims=2, cores=1):
    """{feature: number} for one IR layer and its tiling JSON; `dims` is the
    activation DMA engine's dimensions, `cores` the cores that share a tile."""
    if layer.op == "lstm":
        return recurrent_features(layer, graph, tiling, cores)
    y = graph.tensor(layer.output)
    ins = [graph.tensor(n) for n in layer.inputs]
    feats = dict.fromkeys(FEATURES, 0)
    feats["macs"] = ir.macs(layer, graph)
    feats["plain_macs"] = _plain_macs(layer.op, feats["macs"], layer.input_offset,
                                      ins[0].shape[-1] if ins and ins[0].shape else 0)
    feats["out_elems"] = y.size
    feats["in_elems"] = sum(t.size for t in ins)
    if layer.op in ROW_OPS:
        feats["rows"] = y.size // y.shape[-1]
    view = views.tiler_layer(layer, graph)
    w_total = (view["w_bytes_per_cout"] + view["param_bytes_per_cout"]) * y.shape[-1] if y.shape else 0
    if not tiling["tiled"] or view.get("whole"):
        feats["tiles"] = 1
        _per_tile(feats, layer.op, view, y.shape, y.shape, feats["macs"], cores,
                  in_hw=tuple(ins[0].shape[:2]) if len(ins[0].shape) >= 3 else None)
        oh, ow = (y.shape[0], y.shape[1]) if len(y.shape) >= 3 else (1, 1)
        feats["split_macs"] = round(feats["macs"] * _split(layer.op, oh, ow, y.shape[-1], cores)[0])
        feats["act_bytes"] = sum(t.nbytes for t in ins) + y.nbytes
        feats["act_xfers"] = len(ins) + 1
        feats["w_bytes"] = w_total
        feats["w_xfers"] = 1 if w_total else 0
        return feats
    _walk(feats, layer.op, view, tiling, list(ins[0].shape), list(y.shape), dims, cores)
    return feats


def _walk(feats, op, view, tiling, ishape, oshape, dims, cores):
    """The tiled features of the steps the generated code walks: its
    tiles, or a split tiling's steps (each tile once per reduction chunk,
    codegen/split.py), counted per tile: its chunks' shares of
    the MACs, im2col and input bytes sum to the tile's; per step the
    kernel call, its taps and channels, its input box's transfers (a
    channel slice), the weights (per channel tile, or per step of a split
    tiling), and the partial sums stored and reloaded between its chunks
    (acc_elems); the output box once."""
    n_in = view["n_inputs"]
    size = oshape[0] * oshape[1] * oshape[2]
    w_total = (view["w_bytes_per_cout"] + view["param_bytes_per_cout"]) * oshape[-1]
    parts = geometry.chunks(view, tiling) if geometry.split_k(tiling) else [(0, ishape[2])]
    n_k = len(parts)
    channel_tiles, spatial = set(), set()
    split = 0.0
    for t in geometry.tiles(view, tiling):
        vol = t["oh"] * t["ow"] * t["oc"]
        feats["tiles"] += n_k
        share = vol / size
        split += feats["macs"] * share * _split(op, t["oh"], t["ow"], t["oc"], cores)[0]
        before = feats["taps"], feats["chans"]
        _per_tile(feats, op, view, (t["oh"], t["ow"], t["oc"]), oshape, feats["macs"] * share, cores,
                  in_hw=(t["ih"], t["iw"]))
        feats["taps"] += (feats["taps"] - before[0]) * (n_k - 1)
        feats["chans"] += (feats["chans"] - before[1]) * (n_k - 1)
        for _, kc in parts:
            ic = kc if n_k > 1 else t["ic"]
            feats["act_bytes"] += n_in * t["ih"] * t["iw"] * ic * view["in_bytes"]
            feats["act_xfers"] += n_in * _box_xfers(ishape, (t["ih"], t["iw"], ic), dims)
        feats["act_bytes"] += vol * view["out_bytes"]
        feats["act_xfers"] += _box_xfers(oshape, (t["oh"], t["ow"], t["oc"]), dims)
        if n_k > 1:
            feats["acc_elems"] = feats.get("acc_elems", 0) + vol * (n_k - 1)
        channel_tiles.add(t["oc0"])
        spatial.add((t["oh0"], t["ow0"]))
    feats["split_macs"] = round(split)
    if w_total and n_k > 1:
        # every step its block of weights, each spatial tile again; the
        # parameters once per channel tile
        feats["w_bytes"] = (view["w_bytes_per_cout"] * len(spatial) + view["param_bytes_per_cout"]) * oshape[-1]
        feats["w_xfers"] = feats["tiles"] + (len(channel_tiles) if view["param_bytes_per_cout"] else 0)
    elif w_total:
        feats["w_bytes"] = w_total
        feats["w_xfers"] = len(channel_tiles) * (2 if view["param_bytes_per_cout"] else 1)


def graph_features(graph, tilings, target):
    """[features per layer] in graph order; tilings: {layer name: tiling}."""
    place = target["place"]
    engine = views.dma_engine(target, place["activations"], place["tiles"])
    dims = target["dma"][engine]["dims"] if engine is not None else 3
    return [layer_features(layer, graph, tilings[layer.name], dims, target["cores"]) for layer in graph.layers]


def stream_features(graph, plan):
    """{layer name: {stream_bytes, stream_xfers}} from a memory plan's weight
    stream (memplan.json's weights.stream; {} without one). tsr_wstream_next
    (kernels/include/tessera/tile.h) starts chunk k + 1 when its layer takes
    chunk k, and the first call loads chunk 0 too: those are the bytes the
    layer's window moves (a chunk's buffer may be larger than its channels'
    bytes: the last chunk of a layer is partial). One transfer per array
    (weights and each parameter) of the chunk."""
    stream = (plan or {}).get("weights", {}).get("stream")
    if not stream:
        return {}
    chunks = stream["chunks"]

    def real(c):
        layer = graph.layer(c["layer"])
        view = views.tiler_layer(layer, graph)
        per_c = view["w_bytes_per_cout"] + view["param_bytes_per_cout"]
        return min(c["n"] * per_c, c["bytes"]), len(stream["layers"][c["layer"]]["layout"])
    out = {}
    for k, c in enumerate(chunks):
        mine = out.setdefault(c["layer"], {"stream_bytes": 0, "stream_xfers": 0})
        for j in ([0] if k == 0 else []) + ([k + 1] if k + 1 < len(chunks) else []):
            b, x = real(chunks[j])
            mine["stream_bytes"] += b
            mine["stream_xfers"] += x
    return out


def plan_features(graph, plan):
    """{layer name: {feature: value}} the memory plan (memplan.json's
    content) sets over the tiling's: the weight stream (stream_features),
    and for a layer run in place (plan["direct"], tessera.planning.inplace: no tiles,
    nothing moved to the tile level) no DMA: act_* and w_* 0; its kernel
    calls as tiles (a depthwise run by rows, "depthwise_rows", calls once
    per band of rows: tessera.tiles.geometry.bands), and for those each call's
    channel setup as row_chans."""
    out = stream_features(graph, plan)
    for name, kind in sorted((plan or {}).get("direct", {}).items()):
        layer = graph.layer(name)
        calls = len(geometry.bands(layer, graph, kind)) if kind.startswith("depthwise") else 1
        out.setdefault(name, {}).update(act_bytes=0, act_xfers=0, w_bytes=0, w_xfers=0, tiles=calls,
                                        row_chans=calls * graph.tensor(layer.output).shape[-1]
                                        if kind == "depthwise_rows" else 0)
    return out


def build_features(build_dir, target):
    """[(layer name, op, features)] of a finished build directory, from its
    graph.json and tiling/*.json with this version's features (so a refit
    after the features change needs no rebuild)."""
    import glob
    import os

    from ..util import canon

    graph = ir.Graph.from_json(canon.read_json(os.path.join(build_dir, "graph.json")))
    tilings = {}
    for f in sorted(glob.glob(os.path.join(build_dir, "tiling", "*.json"))):
        if not f.endswith(".solve.json"):
            t = canon.read_json(f)
            if "layer" in t:
                tilings[t["layer"]] = t
    feats = graph_features(graph, tilings, target)
    plan = os.path.join(build_dir, "memplan.json")
    streamed = plan_features(graph, canon.read_json(plan)) if os.path.exists(plan) else {}
    for layer, f in zip(graph.layers, feats):
        f.update(streamed.get(layer.name, {}))
    return [(layer.name, layer.op, f) for layer, f in zip(graph.layers, feats)]


def _view_macs(view):
    Ho, Wo, Co = view["out"]
    kh, kw = view.get("kernel", (1, 1))
    out = Ho * Wo * Co
    op = view["op"]
    if op in ("conv2d", "pointwise", "matmul"):
        return out * (kh * kw if op != "matmul" else 1) * view["in"][2]
    if op in ("depthwise", "avgpool", "maxpool"):
        return out * kh * kw
    if op == "linear":
        return out * view["in"][0] * view["in"][1] * view["in"][2]
    return out


def view_features(view, tiling, dims=2, cores=1, input_offset=128):
    """layer_features from the tiler's view of a layer alone (what the tiler
    has when tile_cost=model ranks its candidates): the same features, the
    inputs' elements counted from the view; the layer's input offset (not
    in the view) given apart (plain_macs: the same for every tile of a
    layer, so it never changes which tile ranks first)."""
    Ho, Wo, Co = view["out"]
    H, W, C = view["in"]
    size = Ho * Wo * Co
    feats = dict.fromkeys(FEATURES, 0)
    feats["macs"] = _view_macs(view)
    feats["plain_macs"] = _plain_macs(view["op"], feats["macs"], input_offset, C)
    feats["out_elems"] = size
    feats["in_elems"] = sum(view["in_sizes"]) if "in_sizes" in view else view["n_inputs"] * H * W * C
    if view["op"] in ROW_OPS:
        feats["rows"] = Ho * Wo
    _walk(feats, view["op"], view, tiling, [H, W, C], [Ho, Wo, Co], dims, cores)
    return feats
