"""The cost model's part of report.json: per layer the features, the
estimate and the measured count side by side, each labeled; and the totals.

meta["cost"] (from the SCons glue): {"file": the coefficients file relative
to the checkout or None, "coefficients": its content or None, "dims": the
activation DMA engine's dimensions, "cores": the cores sharing a tile}.
"""

from ..cost import features, model


def add_costs(out, meta, graph, tilings, count_key, plan=None):
    cost = meta.get("cost")
    if not cost:
        return
    coefs = cost.get("coefficients")
    by_layer = {t["layer"]: t for t in tilings}
    streamed = features.plan_features(graph, plan)     # weight stream, layers in place
    est_total = 0
    for entry, layer in zip(out["layers"], graph.layers):
        t = by_layer[layer.name]
        feats = features.layer_features(layer, graph, t, cost.get("dims", 2), cost.get("cores", 1))
        feats.update(streamed.get(layer.name, {}))
        item = {"features": feats}
        if coefs is not None:
            item["estimate"] = model.estimate(coefs, layer.op, feats, t.get("buffering", 2))
            est_total += item["estimate"]
        measured = entry.get(count_key) if count_key else None
        if measured is not None and "estimate" in item:
            item["measured"] = measured
            item["error"] = _error(item["estimate"], measured)
        entry["cost"] = item
    label = {"features": "what the cost model reads (tessera.cost.features), from the IR and tiling"}
    if coefs is not None:
        label["estimate"] = (f"{coefs.get('counts', meta['counts'])} estimated before running by the cost "
                             f"model ({cost['file']}, combine: {coefs.get('combine', 'sum')})")
        label["measured"] = out["counts"]["note"]
        label["error"] = "(estimate - measured) / measured"
        tot = {"estimate": est_total}
        measured = out["totals"].get(count_key) if count_key else None
        if measured:
            layer_sum = sum(l.get(count_key, 0) for l in out["layers"])
            tot.update(measured=layer_sum, error=_error(est_total, layer_sum))
        out["totals"]["cost"] = tot
    else:
        label["estimate"] = f"none: no coefficients for {meta['kernels']} on {meta['target']} yet"
    out["counts"]["cost"] = label


def _error(est, measured):
    return round((est - measured) / measured, 4) if measured else None
