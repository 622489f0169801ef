"""Segment-level overlap (vMCU): how far a layer's output may start below its
input, computed exactly from the tile table the generated code walks.

The activation level sees each tile's input window read, then its output
window written (hazard.py: tile i + 1's prefetch may land after tile i's
write-back, so a byte written by tile i must not be read by any later
tile). With the output placed `gap` bytes below the input's start, output
byte p sits on input byte p - gap; no later tile reads what an earlier tile
wrote when

    gap > max over j of (last byte written by tiles 0..j-1) - (first byte read by tile j)

The smallest such gap is the pair's allowed overlap; a layer computed in one
piece (one tile, or a whole-tensor layer) reads everything before writing,
so its output may lie right on its input (gap 0).

Only a layer's single input whose last reader is that layer may be overlapped
(a residual or a tensor with several readers stays whole until its last
reader); never the network's input (the application owns it); matmul and
layers with several inputs stay apart (no overlap where unsure).
"""

from .. import ir
from ..config.views import is_whole, tiler_layer
from ..tiler import tiles as tile_list
from ..tiles.geometry import steps_gap, tensors_gap
from . import inplace

# Ops whose code moves data as hazard.py replays it: tiled through L1
# (codegen/layer.py) or copied whole into L1 first (codegen/whole.py). An op
# added later stays apart until it is listed here.
OVERLAP_OPS = ("conv2d", "depthwise", "pointwise", "linear", "maxpool", "avgpool", "resize", "softmax")


def safe_gap(layer, graph, tiling):
    """The smallest distance (bytes) the output may start below the input."""
    if is_whole(layer, graph) or not tiling.get("tiled", True):
        return 0
    steps = (([(t["ih0"], t["ih"], t["iw0"], t["iw"], t["ic0"], t["ic"])],
              [(t["oh0"], t["oh"], t["ow0"], t["ow"], t["oc0"], t["oc"])])
             for t in tile_list(tiler_layer(layer, graph), tiling))
    return tensors_gap(steps, graph.tensor(layer.inputs[0]), graph.tensor(layer.output))


def _eligible(graph):
    """Steps and layers whose single input may be overlapped by the output
    (the static conditions; the gap depends on the tiling)."""
    last = graph.last_use()
    for step, layer in enumerate(graph.layers):
        if len(layer.inputs) != 1 or layer.op not in OVERLAP_OPS:
            continue
        x = layer.inputs[0]
        if x in graph.inputs or x in graph.outputs or last.get(x) != step:
            continue
        if len(graph.tensor(x).shape) != 3 or len(graph.tensor(layer.output).shape) != 3:
            continue
        yield step, layer


ROW_OPS = ("conv2d", "depthwise", "pointwise", "maxpool", "avgpool")


def row_band_layers(graph):
    """Layers the tiler should cut in row bands of all channels (the tile
    order then consumes the input top to bottom, so the output can follow
    it closely: a gap of a few rows instead of nearly the whole output).

    Decided from the graph alone (tensor-level liveness), before tiling: no
    plan goes below the floor F = the largest live set with every candidate
    pair overlapped as far as it can be (its smaller tensor inside the
    larger), so only the steps whose whole tensors take more than F have
    to overlap; elsewhere row bands would cost time (more, smaller tiles)
    and save nothing at the peak."""
    live, floors = step_floors(graph)
    floor = max(floors, default=0)
    return sorted(layer.name for step, layer in _eligible(graph)
                  if layer.op in ROW_OPS and live[step] > floor)


def step_floors(graph):
    """Per step, the whole tensors' live bytes (weights and constants
    apart), and the floor no plan goes below there: those bytes less the
    smaller tensor of the step's candidate pair (as far as it can overlap).
    (live, floors), two lists over the steps."""
    producer, last = graph.producer(), graph.last_use()
    live = [0] * len(graph.layers)
    for name, t in graph.tensors.items():
        if name not in producer and name not in graph.inputs:
            continue     # weights and constants are not activations
        start = 0 if name in graph.inputs else producer[name]
        for step in range(start, last.get(name, start) + 1):
            live[step] += t.nbytes
    floors = list(live)
    for s, layer in _eligible(graph):
        floors[s] -= min(graph.tensor(layer.inputs[0]).nbytes, graph.tensor(layer.output).nbytes)
    return live, floors


def candidates(graph, tilings, direct=None, skip=()):
    """[{"below": output, "above": input, "gap": bytes}] for every layer whose
    output may overlap its consumed input (the allocator decides whether it
    does). direct: layer name -> kind for the layers run in place (their
    gap follows the kernel's loop order, tessera.planning.inplace); `skip`: outputs
    whose pairs come from elsewhere (fused steps').
    """
    direct = direct or {}
    out = []
    for _, layer in _eligible(graph):
        if layer.output in skip:
            continue
        x = layer.inputs[0]
        if layer.name in direct:
            gap = inplace.gap(layer, graph, direct[layer.name])
        else:
            gap = safe_gap(layer, graph, tilings[layer.name])
        if gap < graph.tensor(layer.output).nbytes:
            out.append({"below": layer.output, "above": x, "gap": gap})
    return out


def band_gap(x_shape, xe, y_shape, ye, bands):
    """safe_gap for a fused DW->PW step (fusion/tiler.py): band i reads input
    rows [ih0, ih0 + ih) of every column and channel and writes output rows
    [oh0, oh0 + oh), with the same double-buffered timing as a tiled layer."""
    _, W, C = x_shape
    _, Wo, Co = y_shape
    steps = (([(b["ih0"], b["ih"], 0, W, 0, C)], [(b["oh0"], b["oh"], 0, Wo, 0, Co)]) for b in bands)
    return steps_gap(steps, x_shape, xe, y_shape, ye)


def fused_candidates(graph, fused):
    """The pairs of fused steps (fused: group -> {"layers", "bands"} of a
    DW->PW or PW->DW pair, or {"layers", "windows"} of a patched step: its
    patches' input and output boxes, tiles.patches.windows): the step's
    output below its input, when the step is the input's last reader (the
    same rules as for a single layer)."""
    last = graph.last_use()
    index = {layer.name: i for i, layer in enumerate(graph.layers)}
    out = []
    for group in fused.values():
        if group.get("kind") in ("add", "dw_pw_add", "pw_dw_add"):
            continue        # a step with an add epilogue: its output overlaps nothing (it reads the skip too)
        first, final = graph.layer(group["layers"][0]), graph.layer(group["layers"][-1])
        x = first.inputs[0]
        if len(first.inputs) != 1 or x in graph.inputs or x in graph.outputs \
                or not index[first.name] <= last.get(x, -1) <= index[final.name]:
            continue
        xt, yt = graph.tensor(x), graph.tensor(final.output)
        if len(xt.shape) != 3 or len(yt.shape) != 3 or final.output in graph.outputs:
            continue
        if "windows" in group:
            gap = steps_gap(group["windows"], xt.shape, ir.DTYPES[xt.dtype], yt.shape, ir.DTYPES[yt.dtype])
        else:
            gap = band_gap(xt.shape, ir.DTYPES[xt.dtype], yt.shape, ir.DTYPES[yt.dtype], group["bands"])
        if gap < yt.nbytes:
            out.append({"below": final.output, "above": x, "gap": gap})
    return out
