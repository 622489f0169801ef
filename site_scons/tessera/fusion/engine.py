"""The fusion engine: the DW->PW pairs that may run as one fused step.

A pair qualifies when the pointwise is the only reader of the depthwise's
output (else the intermediate must reach L2 anyway), the intermediate is
int8 (the depthwise requantizes), and nothing needs a kernel path the fused
kernel does not have (dilation, parameters per element). Whether the fused
tile fits L1 is the fused tiler's answer, recorded with the candidate.
"""

from ..views import bias_plane, requant_plane, tiler_layer


def _why_not(graph, dw, pw, readers):
    if pw.inputs != [dw.output]:
        return "the pointwise reads more than the depthwise's output"
    if readers.get(dw.output, 0) != 1 or dw.output in graph.outputs:
        return f"{dw.output} has other readers than {pw.name} (it must reach L2 anyway)"
    if dw.requant is None:
        return "the depthwise keeps int32 accumulators (the fused intermediate is int8)"
    if graph.tensor(dw.inputs[0]).dtype != "int8":
        return "the depthwise input is not int8"
    for layer in (dw, pw):
        if layer.dilation and list(layer.dilation) != [1, 1]:
            return f"{layer.name} is dilated"
        if requant_plane(layer) or bias_plane(layer):
            return f"{layer.name} has parameters per element"
    return None


def candidates(graph):
    """[{"dw", "pw", "ok", "reason"}] for every depthwise directly followed
    (in execution order) by a pointwise that reads it."""
    readers = {}
    for layer in graph.layers:
        for name in layer.inputs:
            readers[name] = readers.get(name, 0) + 1
    out = []
    for dw, pw in zip(graph.layers, graph.layers[1:]):
        if dw.op != "depthwise" or pw.op != "pointwise" or dw.output not in pw.inputs:
            continue
        reason = _why_not(graph, dw, pw, readers)
        out.append({"dw": dw.name, "pw": pw.name, "ok": reason is None, "reason": reason or "fusable"})
    return out


def pair_view(graph, dw_name, pw_name):
    """The fused tiler's view of a pair: both layers' tiler views."""
    return {"name": f"{dw_name}+{pw_name}", "dw": tiler_layer(graph.layer(dw_name), graph),
            "pw": tiler_layer(graph.layer(pw_name), graph)}
