"""What min_latency's selector compares: a count (the target runner's unit)
for every layer apart and for every feasible fused group.

fusion_cost=model: the calibrated cost model (tessera.cost): each layer's
estimate from its features and tiling (on a target that runs layers in
place, `cost["in_place"]`, as it will run there: no copies, one call), each
group's from cost.fused.group_estimate (with fitted fused terms: its
layers' tiled estimates minus the fitted saving), so a fused step is
compared with what its layers would really cost apart (stm32h7's dscnn_kws:
a DW->PW pair saves the copies of tiles the layers in place never make). A group estimated faster is still `held` apart
when its saving is within the fit's median error on its kind, when no
fused sweep pair of its kind ran faster on the target, or when it runs in
more bands than any fused sweep pair of its kind (the fit extrapolates).
No coefficients for the target: no costs, and
the selector keeps every layer apart (it cannot promise "never slower").

fusion_cost=measured: the network built and run three times more
(variants/none; variants/all_dw_pw and all_pw_dw, every feasible group of
one kind fused, groups of one kind never overlap): each layer's measured
count from the first, each group's from the others (a fused step's whole
count is on its first layer's row, the second's is zero).
"""

from ..cost import features, model
from ..cost.fused import fitted, group_estimate, why_no_estimate


def model_costs(graph, tilings, fused, cost):
    coefs = cost.get("coefficients")
    where = f"cost model {cost['file']}"
    if coefs is None:
        return {"source": where, "none": f"no calibrated cost model for {cost['kernels']} on {cost['target']} "
                                         f"({cost['file']}): min_latency keeps the layers apart"}
    layers, feats, tiled = {}, {}, {}
    in_place = set(cost.get("in_place", ()))
    for layer in graph.layers:
        t = tilings[layer.name]
        feats[layer.name] = features.layer_features(layer, graph, t, cost["dims"], cost["cores"])
        tiled[layer.name] = model.estimate(coefs, layer.op, feats[layer.name], t.get("buffering", 2))
        f = feats[layer.name]
        if layer.name in in_place:      # as features.plan_features prices a layer in place
            f = dict(f, act_bytes=0, act_xfers=0, w_bytes=0, w_xfers=0, tiles=1)
        layers[layer.name] = model.estimate(coefs, layer.op, f, t.get("buffering", 2))
    # what the fitted saving terms compare a fused step with (cost.fused.saving_features)
    alone = {"tilings": tilings, "features": feats}
    groups, why, held = {}, {}, {}
    unit = coefs.get("counts", cost["unit"])
    for group, (_, ft) in sorted(fused.items()):
        if ft["feasible"]:
            first, second = (graph.layer(n) for n in ft["layers"][:2])
            if ft["kind"] == "add":
                groups[group] = epilogue_estimate(coefs, first, second, graph, ft, cost)
                continue
            extra = 0
            if ft["kind"] in ("dw_pw_add", "pw_dw_add"):
                # the DW->PW or PW->DW step priced (and held) as one, plus its add's compute
                add = graph.layer(ft["layers"][2])
                extra = int(round(model.compute_part(coefs, add.op, features.layer_features(
                    add, graph, tilings[add.name], cost["dims"], cost["cores"]))))
                ft = dict(ft, kind=ft["kind"][:-len("_add")], layers=ft["layers"][:2])
            apart = layers[first.name] + layers[second.name]
            groups[group] = group_estimate(coefs, first, second, graph, ft, cost["cores"],
                                           apart=tiled[first.name] + tiled[second.name], alone=alone)
            if groups[group] is not None:
                groups[group] += extra
                apart += extra
            if groups[group] is None:
                why[group] = f"no estimate from {cost['file']}: {why_no_estimate(coefs, ft)}"
                continue
            # a saving the fit cannot tell from its own error is no promise
            # of "never slower": kept apart (gap8 mbv1_025_224's dw1+pw1,
            # estimated +0.2%, measured -0.9%)
            fit = fitted(coefs, ft) or {}
            margin = fit.get("median_error", 0.0)
            saved = apart - groups[group]
            if saved > 0 and fit.get("faster", 1) == 0:
                # extrapolation: no fused sweep pair of this kind ran faster
                # here (pulp_open: tiny's dw1+pw1 estimated -89%, measured +25%)
                held[group] = (f"estimated {groups[group]} {unit} against {apart} apart ({where}), but no fused "
                               f"sweep pair of kind {ft['kind']} ran faster than its layers on this target "
                               f"(0 of {fit.get('groups', 0)}): kept apart")
            elif saved > 0 and len(ft["bands"]) > fit.get("bands", len(ft["bands"])):
                # extrapolation: more bands (each a pointwise halo recomputed
                # or a depthwise stripe gathered again) than any fused sweep
                # pair of the kind ran in (gap8 mbv1_025_224's pw1+dw2, 10
                # bands: estimated -3.0%, measured +3.4%)
                held[group] = (f"estimated {groups[group]} {unit} against {apart} apart ({where}), but the step "
                               f"runs in {len(ft['bands'])} bands, more than any fused sweep pair of kind "
                               f"{ft['kind']} ({fit['bands']}): kept apart")
            elif 0 < saved <= margin * apart:
                held[group] = (f"estimated {groups[group]} {unit} against {apart} apart ({where}): a saving of "
                               f"{100.0 * saved / apart:.2f}%, within the fit's median error on {ft['kind']} "
                               f"({100.0 * margin:.2f}%)")
    return {"source": where, "unit": unit, "layers": layers, "groups": groups,
            "why": why, "held": held, "missing": "no estimate"}


def epilogue_estimate(coefs, producer, add, graph, ft, cost):
    """An add epilogue's count: the producer's estimate on the epilogue's
    own tiling, plus the add's estimate less its DMA part (the add's compute
    runs on the tiles in L1; of its transfers only the other input's tile
    remains, which the producer's DMA set-up per tile already pays for)."""
    t = ft["tiling"]
    feats = features.layer_features(producer, graph, t, cost["dims"], cost["cores"])
    own = model.estimate(coefs, producer.op, feats, t.get("buffering", 2))
    # the add alone, on the producer's tiles (one add call per tile)
    afeats = features.layer_features(add, graph, t, cost["dims"], cost["cores"])
    return own + int(round(model.compute_part(coefs, add.op, afeats)))


def measured_costs(graph, none_report, *fused_reports, cost):
    from ..config.views import COUNT_KEYS

    count = COUNT_KEYS.get(cost["unit"])
    if count is None or cost["unit"] == "host-ns":     # wall time: not the same twice
        return {"source": "measured", "none": f"{cost['target']}'s runner counts nothing: min_latency keeps the "
                                              f"layers apart"}
    apart = {row["name"]: row for row in none_report["layers"]}
    layers = {layer.name: apart[layer.name].get(count, 0) for layer in graph.layers}
    groups = {}
    for rep in fused_reports:
        fused = {row["name"]: row for row in rep["layers"]}
        for g in rep.get("fusion", {}).get("groups", []):
            groups[g["step"]] = sum(fused[n].get(count, 0) for n in g["layers"])
    return {"source": "measured (variants/none, variants/all_dw_pw, variants/all_pw_dw)", "unit": cost["unit"],
            "layers": layers, "groups": groups, "missing": "no fused variant ran this group"}
