"""The fusion engine: the DW->PW and PW->DW pairs that may run as one fused
step.

A pair qualifies when the second layer is the only reader of the first's
output (else the intermediate must reach L2 anyway), the intermediate is
int8 (the first layer requantizes), and nothing needs a kernel path the
fused kernel does not have (dilation, parameters per element; a PW->DW
step's output is int8 too). Whether the fused tile fits L1 is the fused
tiler's answer, recorded with the candidate. In a PW->DW->PW chain the
depthwise is in two candidates; the selector takes at most one.
"""

from ..views import bias_plane, requant_plane, tiler_layer


KINDS = {("depthwise", "pointwise"): "dw_pw", ("pointwise", "depthwise"): "pw_dw"}


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
    for layer in (first, second):
        if layer.dilation and list(layer.dilation) != [1, 1]:
            return f"{layer.name} is dilated"
        if requant_plane(layer) or bias_plane(layer):
            return f"{layer.name} has parameters per element"
    return None


def candidates(graph):
    """[{"kind", "layers": [first, second], "group", "dw", "pw", "ok",
    "reason"}] for every depthwise directly followed (in execution order) by
    a pointwise that reads it, and every pointwise so followed by a
    depthwise."""
    readers = {}
    for layer in graph.layers:
        for name in layer.inputs:
            readers[name] = readers.get(name, 0) + 1
    out = []
    for first, second in zip(graph.layers, graph.layers[1:]):
        kind = KINDS.get((first.op, second.op))
        if kind is None or first.output not in second.inputs:
            continue
        reason = _why_not(graph, first, second, readers)
        dw, pw = (first, second) if kind == "dw_pw" else (second, first)
        out.append({"kind": kind, "layers": [first.name, second.name], "group": f"{first.name}+{second.name}",
                    "dw": dw.name, "pw": pw.name, "ok": reason is None, "reason": reason or "fusable"})
    return out


def pair_view(graph, first, second):
    """The fused tiler's view of a pair: both layers' tiler views."""
    a, b = graph.layer(first), graph.layer(second)
    kind = KINDS[(a.op, b.op)]
    dw, pw = (a, b) if kind == "dw_pw" else (b, a)
    return {"name": f"{first}+{second}", "kind": kind, "dw": tiler_layer(dw, graph), "pw": tiler_layer(pw, graph)}
