"""The cost model's estimate of a fused DW->PW step (the fusion selector's
min_latency reads it next to the layers' own estimates).

A fused step that runs the library's own depthwise and pointwise kernels
(the `shared` scheme, fusion/tiler.py: per block of rows, the depthwise
split over channels as alone, then the pointwise split over pixels) does
each layer's arithmetic with that layer's kernel, so its compute is each
layer's op coefficients on the layer's features over the fused bands; its
DMA is the step's own: the depthwise's input bands in, the pointwise's
output bands out (the intermediate never moves), both layers' weights once.
A step whose depthwise runs in more than one row block (several bands, or
fd below the band) is not priced either: the depthwise alone splits
channels and gathers each whole column once, fused it gathers every column
again per block, at a per-column cost no fitted term covers (measured on
gap8, mbv1_025_224: such groups +1.9% to +13.2%, while every single-block
group of mbv1_025_128 ran 1.5% to 2.9% faster). A `per_core` fused kernel is another kernel (the reference tsr_dw_pw): the
coefficients fitted on the library's layers say nothing about it, so there
is no estimate (None) unless the coefficients file has an op named for the
step's kind (`dw_pw`, `pw_dw`: fitted on fused steps), which then prices the
whole step's compute. The PW->DW steps run the reference tsr_pw_dw
(per_core) on every library.

Where the coefficients file has `fused: {dw_pw|pw_dw: {scheme, saving}}`
(tools/fit_cost_model.py, from the fused sweeps: cost/fused_sweeps.py,
fused_fit.py), every step of that kind and scheme is priced as its layers'
own estimates minus the fitted saving (SAVING below), multi-block and
per_core steps included; the rules above are the fallback without it.
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


def group_features(first, second, graph, ft, cores):
    """(first's features, second's features, the step's DMA features) of a
    fused step (DW->PW or PW->DW)."""
    bands = ft["bands"]
    shared = ft.get("scheme") == "shared"
    C = graph.tensor(first.output).shape[-1]
    Wo = graph.tensor(second.output).shape[1]

    def units(layer):
        if not shared:
            return (lambda b: C) if ft.get("kind") == "pw_dw" else (lambda b: b["oh"])
        return (lambda b: C) if layer.op == "depthwise" else (lambda b: b["oh"] * Wo)
    ff = _part(first, graph, bands, units(first), cores)
    sf = _part(second, graph, bands, units(second), cores)
    fv, sv = views.tiler_layer(first, graph), views.tiler_layer(second, graph)
    x, out = graph.tensor(first.inputs[0]), graph.tensor(second.output)
    act = sum(b["ih"] * x.shape[1] * x.shape[2] * fv["in_bytes"] + b["oh"] * Wo * out.shape[2] * sv["out_bytes"]
              for b in bands)
    w_bytes = ((fv["w_bytes_per_cout"] + fv["param_bytes_per_cout"]) * C
               + (sv["w_bytes_per_cout"] + sv["param_bytes_per_cout"]) * out.shape[2])
    # as features.layer_features counts a layer's: one transfer untiled, else
    # weights and parameters apart
    w_xfers = sum((1 if v["w_bytes_per_cout"] or v["param_bytes_per_cout"] else 0) if not ft["tiled"] else
                  (1 if v["w_bytes_per_cout"] else 0) + (1 if v["param_bytes_per_cout"] else 0) for v in (fv, sv))
    dma = dict(dict.fromkeys(FEATURES, 0), act_bytes=act, act_xfers=2 * len(bands), w_bytes=w_bytes,
               w_xfers=w_xfers, tiles=len(bands))
    return ff, sf, dma


# what fusing saves against the layers apart (their estimates minus the
# fused step's count), fitted per kind on the fused sweeps
# (cost/fused_fit.py): a constant (one step, one call and fork fewer), the
# intermediate's bytes (it never goes to L2 and back), per channel of
# every depthwise row block after the first (the stripes gathered again),
# and per MAC (a fused kernel that is not the layers' own, per_core,
# computes at its own speed). Chosen by leaving each fused sweep out in
# turn on gap8: with a per channel-column term too, or without `step`, the
# held-out pairs' decisions were no better and their errors larger.
SAVING = ("step", "inter_bytes", "chan_blocks", "macs")


def saving_features(first, second, graph, ft):
    dw = first if first.op == "depthwise" else second
    C = graph.tensor(dw.inputs[0]).shape[2]
    extra = sum(-(-b["oh"] // ft["fd"]) for b in ft["bands"]) - 1
    return {"step": 1, "inter_bytes": graph.tensor(first.output).nbytes, "chan_blocks": C * extra,
            "macs": ir.macs(first, graph) + ir.macs(second, graph)}


def fitted(coefs, ft):
    """The fitted saving terms for this step's kind and scheme, or None."""
    f = (coefs or {}).get("fused", {}).get(ft.get("kind", "dw_pw"))
    return f if f and f.get("scheme") == ft.get("scheme", "per_core") else None


def saving(coefs, first, second, graph, ft):
    """The count fusing this step saves (negative: fused is slower), or None
    without fitted terms for its kind and scheme."""
    f = fitted(coefs, ft)
    if f is None:
        return None
    x = saving_features(first, second, graph, ft)
    return sum(f["saving"].get(k, 0.0) * x[k] for k in SAVING)


def why_no_estimate(coefs, ft):
    """None when group_estimate prices this fused step, else why not."""
    kind = ft.get("kind", "dw_pw")
    if fitted(coefs, ft) is not None:
        return None
    if ft.get("scheme") == "shared":
        blocks = sum(-(-b["oh"] // ft["fd"]) for b in ft["bands"])
        if blocks > 1:
            return (f"the depthwise runs in {blocks} row blocks: each gathers its stripes and requantization "
                    f"constants again, a cost the model has no term for (measured on gap8: up to +13% per "
                    f"group); fusion_cost=measured decides such groups")
        return None
    if kind not in coefs.get("ops", {}):
        return (f"the fused kernel (tsr_{kind}, per_core) is not the layers' kernels and the cost model fits "
                f"no op {kind}")
    return None


def group_parts(coefs, first, second, graph, ft, cores):
    """(compute, the step's DMA features) of a fused step the model prices."""
    ff, sf, dma = group_features(first, second, graph, ft, cores)
    kind = ft.get("kind", "dw_pw")
    if ft.get("scheme") == "shared":
        comp = model.compute_part(coefs, first.op, ff) + model.compute_part(coefs, second.op, sf)
    else:
        both = {k: ff[k] + sf[k] for k in FEATURES}
        both["tiles"] = ff["tiles"]
        comp = model.compute_part(coefs, kind, both)
    return comp, dma


def group_estimate(coefs, first, second, graph, ft, cores, apart=None):
    """The fused step's estimated count, or None when the model cannot
    price it (why_no_estimate says why; see the module docstring). With
    fitted saving terms for the step's kind (coefficients' `fused:`) and
    `apart` (the two layers' own estimates, summed), the estimate is apart
    minus the fitted saving: the fusion decision then rests on the saving
    alone, not on the layer model's error."""
    if why_no_estimate(coefs, ft) is not None:
        return None
    if apart is not None and fitted(coefs, ft) is not None:
        return int(round(apart - saving(coefs, first, second, graph, ft)))
    comp, dma = group_parts(coefs, first, second, graph, ft, cores)
    d = model.dma_part(coefs, dma)
    if coefs.get("combine", "sum") == "sum" or ft["buffering"] < 2:
        return int(round(comp + d))
    return int(round(max(comp, d) + d / max(dma["tiles"], 1)))
