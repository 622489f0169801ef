"""The cost model's stable API, for the tiler, the fusion selector
(`fusion_cost=model`) and the out-of-core scheduler: estimates in the unit
of the target's runner (QEMU instructions, GVSoC cycles), before anything
runs. See docs/cost_model.md.

    coefs = coefficients(target)                      # None: no fit for this target
    n = estimate_layer(target, layer, graph, tiling)  # one layer at one tiling
    n = estimate_group(target, layers, graph, tilings, fused)   # a fused DW->PW step
    parts = explain_layer(target, layer, graph, tiling)         # {compute, dma, estimate, features}

`target` is the loaded target config (tessera.config.load_target: name,
kernels, cores, place, dma), `layer` an IR layer of `graph`, `tiling` the
layer's tiling JSON (tiler.solve_layer's result). Every function returns
None when the target's kernel library has no coefficients for it (host:
nothing deterministic to fit). Pure functions of their arguments and the
committed coefficients file: the same inputs give the same number.
"""

import os

from . import features, model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_loaded = {}


def coefficients(target):
    """The fitted coefficients of the target's kernel library on it (read
    once per process), or None."""
    file = model.path(ROOT, target["kernels"], target["name"])
    if file not in _loaded:
        _loaded[file] = model.load(file)
    return _loaded[file]


def _dims(target):
    from .. import views

    place = target["place"]
    engine = views.dma_engine(target, place["activations"], place["tiles"])
    return target["dma"][engine]["dims"] if engine is not None else 3


def layer_features(target, layer, graph, tiling):
    return features.layer_features(layer, graph, tiling, _dims(target), target["cores"])


def explain_layer(target, layer, graph, tiling, coefs=None):
    coefs = coefs or coefficients(target)
    if coefs is None:
        return None
    f = layer_features(target, layer, graph, tiling)
    return {"features": f, "compute": model.compute_part(coefs, layer.op, f), "dma": model.dma_part(coefs, f),
            "estimate": model.estimate(coefs, layer.op, f, tiling.get("buffering", 2))}


def estimate_layer(target, layer, graph, tiling, coefs=None):
    """One layer's estimated count at this tiling (int), or None."""
    parts = explain_layer(target, layer, graph, tiling, coefs)
    return None if parts is None else parts["estimate"]


def explain_group(target, layers, graph, tilings, fused, coefs=None):
    """{compute, dma, dma_features, estimate} of a fused DW->PW step (see
    estimate_group), or None."""
    coefs = coefs or coefficients(target)
    if coefs is None:
        return None
    bands = fused["bands"]
    by_name = {layer.name: layer for layer in graph.layers}
    comp, dma = 0.0, dict.fromkeys(model.DMA, 0)
    for name in layers:
        f = layer_features(target, by_name[name], graph, tilings[name])
        f = dict(f, tiles=len(bands))
        comp += model.compute_part(coefs, by_name[name].op, f)
        dma["w_bytes"] += f["w_bytes"]
        dma["w_xfers"] += min(f["w_xfers"], 2)       # weights and parameters, once
    dw, pw = by_name[layers[0]], by_name[layers[-1]]
    x, y = graph.tensor(dw.inputs[0]), graph.tensor(pw.output)
    _, W, C = x.shape
    _, Wo, Co = y.shape
    for band in bands:        # whole rows: one contiguous block each way
        dma["act_bytes"] += band["ih"] * W * C * (x.nbytes // x.size) + band["oh"] * Wo * Co * (y.nbytes // y.size)
        dma["act_xfers"] += 2
    d = model.dma_part(coefs, dma)
    if coefs.get("combine", "sum") == "sum" or fused.get("buffering", 2) < 2:
        total = comp + d
    else:
        total = max(comp, d) + d / max(len(bands), 1)
    return {"compute": comp, "dma": d, "dma_features": dma, "estimate": int(round(total))}


def estimate_group(target, layers, graph, tilings, fused, coefs=None):
    """A fused DW->PW step (fusion.tiler's result `fused`: its row bands and
    buffering): its layers' compute, each at its own tiling in `tilings`
    (what the kernels do per element does not change when two run back to
    back; the per-tile part is counted once per band), plus the group's DMA:
    the depthwise's input bands in and the pointwise's output bands out (the
    intermediate stays in L1), both layers' weights once. Combined like a
    layer (sum, or overlap over the bands). An int, or None. The one place
    a fused group is estimated: the fusion selector and the scheduler call
    this."""
    parts = explain_group(target, layers, graph, tilings, fused, coefs)
    return None if parts is None else parts["estimate"]
