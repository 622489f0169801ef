"""The cost model's estimate of a fused DW->PW step (the fusion selector's
min_latency reads it next to the layers' own estimates).

A fused step that runs the library's own depthwise and pointwise kernels
(the `shared` scheme, fusion/tiler.py: per block of rows, the depthwise
split over channels as alone, then the pointwise split over pixels) does
each layer's arithmetic with that layer's kernel, so its compute is each
layer's op coefficients on the layer's features over the fused bands; its
DMA is the step's own: the depthwise's input bands in, the pointwise's
output bands out (the intermediate never moves), both layers' weights once.
A `per_core` fused kernel is another kernel (the reference tsr_dw_pw): the
coefficients fitted on the library's layers say nothing about it, so there
is no estimate (None) unless the coefficients file has an op `dw_pw`
(fitted on fused steps), which then prices the whole step's compute.
"""

from .. import ir, views
from . import model
from .features import FEATURES, _balance


def _part(layer, graph, bands, units_of, cores):
    y = graph.tensor(layer.output)
    macs = ir.macs(layer, graph)
    split = sum(macs * b["oh"] / y.shape[0] * _balance(units_of(b), cores) for b in bands)
    return dict(dict.fromkeys(FEATURES, 0), macs=macs, split_macs=round(split), out_elems=y.size,
                in_elems=sum(graph.tensor(n).size for n in layer.inputs), tiles=len(bands))


def group_features(dw, pw, graph, ft, cores):
    """(dw features, pw features, the step's DMA features) of a fused step."""
    bands = ft["bands"]
    shared = ft.get("scheme") == "shared"
    C = graph.tensor(dw.output).shape[-1]
    Wo = graph.tensor(pw.output).shape[1]
    dwf = _part(dw, graph, bands, (lambda b: C) if shared else (lambda b: b["oh"]), cores)
    pwf = _part(pw, graph, bands, (lambda b: b["oh"] * Wo) if shared else (lambda b: b["oh"]), cores)
    dv, pv = views.tiler_layer(dw, graph), views.tiler_layer(pw, graph)
    x, out = graph.tensor(dw.inputs[0]), graph.tensor(pw.output)
    act = sum(b["ih"] * x.shape[1] * x.shape[2] * dv["in_bytes"] + b["oh"] * Wo * out.shape[2] * pv["out_bytes"]
              for b in bands)
    w_bytes = ((dv["w_bytes_per_cout"] + dv["param_bytes_per_cout"]) * C
               + (pv["w_bytes_per_cout"] + pv["param_bytes_per_cout"]) * out.shape[2])
    # as features.layer_features counts a layer's: one transfer untiled, else
    # weights and parameters apart
    w_xfers = sum((1 if v["w_bytes_per_cout"] or v["param_bytes_per_cout"] else 0) if not ft["tiled"] else
                  (1 if v["w_bytes_per_cout"] else 0) + (1 if v["param_bytes_per_cout"] else 0) for v in (dv, pv))
    dma = dict(dict.fromkeys(FEATURES, 0), act_bytes=act, act_xfers=2 * len(bands), w_bytes=w_bytes,
               w_xfers=w_xfers, tiles=len(bands))
    return dwf, pwf, dma


def group_estimate(coefs, dw, pw, graph, ft, cores):
    """The fused step's estimated count, or None when the coefficients do
    not describe its kernel (see the module docstring)."""
    dwf, pwf, dma = group_features(dw, pw, graph, ft, cores)
    if ft.get("scheme") == "shared":
        comp = model.compute_part(coefs, dw.op, dwf) + model.compute_part(coefs, pw.op, pwf)
    elif "dw_pw" in coefs.get("ops", {}):
        both = {k: dwf[k] + pwf[k] for k in FEATURES}
        both["tiles"] = dwf["tiles"]
        comp = model.compute_part(coefs, "dw_pw", both)
    else:
        return None
    d = model.dma_part(coefs, dma)
    if coefs.get("combine", "sum") == "sum" or ft["buffering"] < 2:
        return int(round(comp + d))
    return int(round(max(comp, d) + d / max(dma["tiles"], 1)))
