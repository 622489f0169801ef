"""The fusion engine: the DW->PW and PW->DW pairs that may run as one fused
step.

A pair qualifies when the second layer is the only reader of the first's
output (else the intermediate must reach L2 anyway), the intermediate is
int8 (the first layer requantizes), and nothing needs a kernel path the
fused kernel does not have (dilation, parameters per element; a PW->DW
step's output is int8 too). Whether the fused tile fits L1 is the fused
tiler's answer, recorded with the candidate. In a PW->DW->PW chain the
depthwise is in two candidates; the selector takes at most one.

An add epilogue (kind "add"): a tiled layer whose output only a residual
add reads, the add next in execution order, runs the add on its L1 output
tile (the add's other input's tile DMAed in beside it); the producer's
output never reaches L2. Its candidates overlap a DW->PW or PW->DW pair's
(the projection pointwise in both): the selector chooses exactly.
"""

from .. import ir
from ..config.views import bias_plane, is_whole, param_arrays, requant_plane, tiler_layer


KINDS = {("depthwise", "pointwise"): "dw_pw", ("pointwise", "depthwise"): "pw_dw"}
# the producers an add epilogue may follow: tiled convolution layers
EPILOGUE_OPS = ("conv2d", "pointwise", "depthwise")


def _why_not(graph, first, second, readers):
    if second.inputs != [first.output]:
        return f"the {second.op} reads more than the {first.op}'s output"
    if readers.get(first.output, 0) != 1 or first.output in graph.outputs:
        return f"{first.output} has other readers than {second.name} (it must reach L2 anyway)"
    if first.requant is None:
        return f"the {first.op} keeps int32 accumulators (the fused intermediate is int8)"
    if graph.tensor(first.inputs[0]).dtype != "int8":
        return f"the {first.op} input is not int8"
    if second.op == "depthwise" and second.requant is None:
        return "the depthwise keeps int32 accumulators (the fused PW->DW kernel writes int8)"
    return _why_not_plain(first, second)


def _why_not_plain(*layers):
    """None when no layer is dilated or has parameters per element (what no
    fused kernel takes), else which and why."""
    for layer in layers:
        if layer.dilation and list(layer.dilation) != [1, 1]:
            return f"{layer.name} is dilated"
        if layer.weight_offset:
            return f"{layer.name} has asymmetric (uint8) weights"
        if layer.requant is not None and layer.requant.neg_mul:
            return f"{layer.name} has a LeakyRelu folded into its requantization"
        if requant_plane(layer) or bias_plane(layer):
            return f"{layer.name} has parameters per element"
    return None


def _why_no_epilogue(graph, first, add, readers):
    """None when `add` may run on `first`'s output tiles, else why not."""
    other = [n for n in add.inputs if n != first.output]
    if len(add.inputs) != 2 or len(other) != 1:
        return "the add does not read the layer's output once beside one other input"
    if readers.get(first.output, 0) != 1 or first.output in graph.outputs:
        return f"{first.output} has other readers than {add.name} (it must reach L2 anyway)"
    shapes = {tuple(graph.tensor(n).shape) for n in add.inputs + [add.output]}
    if len(shapes) != 1 or is_whole(add, graph):
        return "the add's inputs and output differ in shape"
    if any(graph.tensor(n).dtype != "int8" for n in add.inputs + [add.output]):
        return "the add's inputs or output are not int8"
    if first.requant is None:
        return f"the {first.op} keeps int32 accumulators"
    if add.requant is None or add.in_shift or param_arrays(add):
        return "the add's requantization is not per tensor with int8 output (the epilogue uses the add kernel's)"
    why = _why_not_plain(first, add)
    if why:
        return why
    if ir.DTYPES[graph.tensor(first.inputs[0]).dtype] != 1:
        return f"the {first.op} input is not int8"
    return None


def _readers(graph):
    """tensor name -> how many layer inputs read it"""
    return {name: len(ix) for name, ix in graph.readers().items()}


def epilogue_candidates(graph):
    """[{"kind": "add", "layers": [producer, add], "group", "ok", "reason"}]
    for every convolution layer directly followed (in execution order) by
    an add that reads its output: the add's other input is then computed
    already (it precedes the producer)."""
    readers = _readers(graph)
    out = []
    for first, second in zip(graph.layers, graph.layers[1:]):
        if first.op not in EPILOGUE_OPS or second.op != "add" or first.output not in second.inputs:
            continue
        reason = _why_no_epilogue(graph, first, second, readers)
        out.append({"kind": "add", "layers": [first.name, second.name], "group": f"{first.name}+{second.name}",
                    "ok": reason is None, "reason": reason or "fusable"})
    return out


def chained_candidates(graph, pairs, epilogues):
    """DW->PW pairs whose pointwise (PW->DW pairs whose depthwise) also
    takes its add as an epilogue (kind "dw_pw_add", "pw_dw_add": the three
    layers as one step, the first two outputs in L1 only), where both halves
    qualify."""
    ok = {tuple(c["layers"]): c for c in pairs + epilogues if c["ok"]}
    out = []
    for c in pairs:
        if not c["ok"]:
            continue
        for e in epilogues:
            if e["ok"] and e["layers"][0] == c["layers"][1] and tuple(e["layers"]) in ok:
                names = c["layers"] + [e["layers"][1]]
                out.append({"kind": c["kind"] + "_add", "layers": names, "group": "+".join(names),
                            "dw": c["dw"], "pw": c["pw"], "ok": True, "reason": "fusable"})
    return out


def candidates(graph):
    """[{"kind", "layers": [first, second], "group", "dw", "pw", "ok",
    "reason"}] for every depthwise directly followed (in execution order) by
    a pointwise that reads it, and every pointwise so followed by a
    depthwise."""
    readers = _readers(graph)
    out = []
    for first, second in zip(graph.layers, graph.layers[1:]):
        kind = KINDS.get((first.op, second.op))
        if kind is None or first.output not in second.inputs:
            continue
        reason = _why_not(graph, first, second, readers)
        dw, pw = (first, second) if kind == "dw_pw" else (second, first)
        out.append({"kind": kind, "layers": [first.name, second.name], "group": f"{first.name}+{second.name}",
                    "dw": dw.name, "pw": pw.name, "ok": reason is None, "reason": reason or "fusable"})
    epilogues = epilogue_candidates(graph)
    return out + epilogues + chained_candidates(graph, out, epilogues)


def pair_view(graph, first, second, third=None):
    """The fused tiler's view of a pair: both layers' tiler views (and of a
    DW->PW pair with its add epilogue: the pointwise's with the skip band,
    the add's)."""
    a, b = graph.layer(first), graph.layer(second)
    if third is not None:
        # the second layer's output bands get the add's other input beside them
        kind = KINDS[(a.op, b.op)]
        views = {"dw_pw": (tiler_layer(a, graph), dict(tiler_layer(b, graph), epilogue=1)),
                 "pw_dw": (dict(tiler_layer(b, graph), epilogue=1), tiler_layer(a, graph))}[kind]
        return {"name": f"{first}+{second}+{third}", "kind": f"{kind}_add", "dw": views[0], "pw": views[1],
                "add": tiler_layer(graph.layer(third), graph)}
    if b.op == "add":
        # an add epilogue: the producer's tiler view with the skip buffer
        # (and the add's, for its transfer and cost)
        return {"name": f"{first}+{second}", "kind": "add", "layer": dict(tiler_layer(a, graph), epilogue=1),
                "add": tiler_layer(b, graph)}
    kind = KINDS[(a.op, b.op)]
    dw, pw = (a, b) if kind == "dw_pw" else (b, a)
    return {"name": f"{first}+{second}", "kind": kind, "dw": tiler_layer(dw, graph), "pw": tiler_layer(pw, graph)}
