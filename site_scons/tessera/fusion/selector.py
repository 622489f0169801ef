"""The fusion selector: the schedule (steps in execution order) under a policy.

min_transfer chooses, among the feasible candidates, the set of disjoint
groups that moves the fewest activation bytes: an exact dynamic program over
the layer chain (best[i] = fewest bytes for layers [0, i)), so overlapping
candidates (a PW->DW->PW chain) are decided exactly too. A group that moves
no fewer bytes than its layers apart is not taken (ties keep layers apart).
"""

from ..views import tiler_layer
from .transfer import fused_transfer, layer_transfer

POLICIES = ("none", "min_transfer")


def select(graph, tilings, fused, policy, cands):
    """schedule.json. tilings: layer name -> its tiling; fused: group name ->
    (pair view, fused tiling) of every candidate solved; cands: the engine's
    candidates (infeasible ones included, with their reason)."""
    if policy not in POLICIES:
        raise ValueError(f"fusion policy {policy!r}")
    names = [layer.name for layer in graph.layers]
    alone = {layer.name: layer_transfer(tiler_layer(layer, graph), tilings[layer.name]) for layer in graph.layers}
    index = {n: i for i, n in enumerate(names)}
    options = {}     # first layer index -> [(group, bytes, length)]
    recorded = []
    for c in cands:
        group = f"{c['dw']}+{c['pw']}"
        entry = {"group": group, "layers": [c["dw"], c["pw"]], "kind": "dw_pw", "fusable": c["ok"],
                 "reason": c["reason"], "unfused_bytes": alone[c["dw"]] + alone[c["pw"]]}
        if c["ok"] and group in fused:
            pair, ft = fused[group]
            if not ft["feasible"]:
                entry.update(fusable=False, reason=ft["reason"])
            else:
                entry["fused_bytes"] = fused_transfer(pair, ft)
                if policy != "none":
                    options.setdefault(index[c["dw"]], []).append((group, entry["fused_bytes"], 2))
        recorded.append(entry)

    # best[i]: (bytes, steps) for layers [0, i)
    best = [(0, [])] + [None] * len(names)
    for i in range(len(names)):
        b, steps = best[i]
        cand = (b + alone[names[i]], steps + [((names[i],), None)])
        if best[i + 1] is None or cand[0] < best[i + 1][0]:
            best[i + 1] = cand
        for group, moved, length in options.get(i, ()):
            cand = (b + moved, steps + [(tuple(names[i:i + length]), group)])
            j = i + length
            if best[j] is None or cand[0] < best[j][0]:
                best[j] = cand
    total, chosen = best[len(names)]
    by_group = {e["group"]: e for e in recorded}
    steps = []
    for layers, group in chosen:
        if group is None:
            steps.append({"step": layers[0], "kind": "layer", "layers": list(layers),
                          "activation_transfer_bytes": alone[layers[0]]})
        else:
            e = by_group[group]
            e["chosen"] = True
            steps.append({"step": group, "kind": "dw_pw", "layers": list(layers),
                          "activation_transfer_bytes": e["fused_bytes"],
                          "reason": f"saves {e['unfused_bytes'] - e['fused_bytes']} of {e['unfused_bytes']} "
                                    f"activation bytes"})
    for e in recorded:
        if not e.get("chosen"):
            e["chosen"] = False
            if policy == "none":
                e["why_apart"] = "fusion=none"
            elif not e["fusable"]:
                e["why_apart"] = e["reason"]
            else:
                e["why_apart"] = "moves no fewer activation bytes than the layers apart"
    unfused = sum(alone.values())
    return {"policy": policy, "steps": steps, "candidates": recorded,
            "totals": {"activation_transfer_bytes": total, "unfused_activation_transfer_bytes": unfused,
                       "saved_bytes": unfused - total,
                       "saved_permille": (unfused - total) * 1000 // unfused if unfused else 0}}
