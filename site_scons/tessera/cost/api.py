"""The cost model's stable API, for the tiler, the fusion selector
(`fusion_cost=model`) and the out-of-core scheduler: estimates in the unit
of the target's runner (QEMU instructions, GVSoC cycles), before anything
runs. See docs/cost_model.md.

    coefs = coefficients(target)                      # None: no fit for this target
    n = estimate_layer(target, layer, graph, tiling)  # one layer at one tiling (plan=: with its weight stream)
    n = estimate_group(target, layers, graph, tilings, fused)   # a fused DW->PW step
    parts = explain_layer(target, layer, graph, tiling)         # {compute, dma, estimate, features}

`target` is the loaded target config (tessera.config.load_target: name,
kernels, cores, place, dma), `layer` an IR layer of `graph`, `tiling` the
layer's tiling JSON (tiler.solve_layer's result). Every function returns
None when the target's kernel library has no coefficients for it (host:
nothing deterministic to fit). Pure functions of their arguments and the
committed coefficients file: the same inputs give the same number.
"""

from . import features, model
from ..util.paths import DATA as ROOT
_loaded = {}


def coefficients(target):
    """The fitted coefficients of the target's kernel library on it (read
    once per process; model.source says which file: the one the target's
    `cost_model:` names, its own, or a same-core target's), or None."""
    file, _ = model.source(ROOT, target)
    if file not in _loaded:
        _loaded[file] = model.load(file)
    return model.for_target(_loaded[file], target)


def _dims(target):
    from ..config import views

    place = target["place"]
    engine = views.dma_engine(target, place["activations"], place["tiles"])
    return target["dma"][engine]["dims"] if engine is not None else 3


def layer_features(target, layer, graph, tiling, plan=None):
    """The layer's features; with the memory plan (memplan.json's content)
    also the weights it streams in (stream_bytes: 0 without a plan, as for
    the tiler and the fusion selector, which run before there is one) and,
    for a layer the plan runs in place, no DMA."""
    f = features.layer_features(layer, graph, tiling, _dims(target), target["cores"])
    f.update(features.plan_features(graph, plan).get(layer.name, {}))
    return f


def explain_layer(target, layer, graph, tiling, coefs=None, plan=None):
    coefs = coefs or coefficients(target)
    if coefs is None:
        return None
    f = layer_features(target, layer, graph, tiling, plan)
    if layer.op == "lstm" and layer.rnn["cell"] == "ops":
        # a cell of plain ops: each body op priced by its own op's coefficients, every step
        compute = layer.rnn["steps"] * sum(model.compute_part(coefs, *features.body_features(op, layer.rnn,
                                                                                              target["cores"]))
                                           for op in layer.rnn["body"])
        dma = model.dma_part(coefs, f)
        return {"features": f, "compute": compute, "dma": dma, "estimate": int(round(compute + dma))}
    return {"features": f, "compute": model.compute_part(coefs, layer.op, f), "dma": model.dma_part(coefs, f),
            "estimate": model.estimate(coefs, layer.op, f, tiling.get("buffering", 2))}


def estimate_layer(target, layer, graph, tiling, coefs=None, plan=None):
    """One layer's estimated count at this tiling (int), or None; `plan`:
    see layer_features."""
    parts = explain_layer(target, layer, graph, tiling, coefs, plan)
    return None if parts is None else parts["estimate"]


def explain_group(target, layers, graph, tilings, fused, coefs=None):
    """{compute, dma, dma_features, estimate, why_not} of a fused step (see
    estimate_group), or None without coefficients. The model itself is
    cost.fused, the one place a fused step is priced; `tilings` (the layers'
    own) is kept for callers that have them."""
    from . import fused as fused_model

    coefs = coefs or coefficients(target)
    if coefs is None:
        return None
    first, second = graph.layer(layers[0]), graph.layer(layers[-1])
    comp, dma = fused_model.group_parts(coefs, first, second, graph, fused, target["cores"])
    # with fitted fused terms: the layers' own estimates minus the saving
    apart = alone = None
    if tilings and all(n in tilings for n in (first.name, second.name)):
        parts = {x.name: explain_layer(target, x, graph, tilings[x.name], coefs) for x in (first, second)}
        apart = sum(p["estimate"] for p in parts.values())
        alone = {"tilings": tilings, "features": {n: p["features"] for n, p in parts.items()}}
    return {"compute": comp, "dma": model.dma_part(coefs, dma), "dma_features": dma,
            "estimate": fused_model.group_estimate(coefs, first, second, graph, fused, target["cores"], apart,
                                                   alone),
            "saving": fused_model.saving(coefs, first, second, graph, fused, alone, target["cores"]),
            "why_not": fused_model.why_no_estimate(coefs, fused)}


def estimate_group(target, layers, graph, tilings, fused, coefs=None):
    """A fused DW->PW or PW->DW step (fusion.tiler's result `fused`: its
    bands, scheme and buffering): its layers' compute over the fused bands
    plus the step's own DMA (the first layer's input bands in, the second's
    output bands out, the intermediate stays in L1, both layers' weights
    once), as cost.fused prices it. An int, or None when there are no
    coefficients or the model cannot price the step (explain_group's
    why_not says why)."""
    parts = explain_group(target, layers, graph, tilings, fused, coefs)
    return None if parts is None else parts["estimate"]
