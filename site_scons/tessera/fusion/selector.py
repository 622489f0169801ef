"""The fusion selector: the schedule (steps in execution order) under a policy.

min_transfer chooses, among the feasible candidates, the set of disjoint
groups that moves the fewest activation bytes: an exact dynamic program over
the layer chain (best[i] = fewest bytes for layers [0, i)), so overlapping
candidates (a PW->DW->PW chain) are decided exactly too. A group that moves
no fewer bytes than its layers apart is not taken (ties keep layers apart).

min_latency runs the same program on estimated counts (instructions or
cycles, the target's runner's unit): `costs` gives every layer's estimate
and each fused group's (None: no estimate, the group is not taken). A
group is taken only when its estimate is below its layers' apart, so the
schedule's estimate is never above fusion=none's; ties keep layers apart,
and so does a group in `costs["held"]` (a saving within the cost model's
own error: its reason becomes the group's why_apart).
Without costs (no calibrated cost model for the target) min_latency keeps
every layer apart, with that reason.

min_memory fuses only the groups that lower the activation peak's floor
(fusion/memory.py: the fewest it needs; elsewhere layers stay apart).
"""

from ..config.views import tiler_layer
from .transfer import fused_transfer, layer_transfer

POLICIES = ("none", "min_latency", "min_transfer", "min_memory")
# "all_dw_pw", "all_pw_dw" (every feasible group of one kind: they never
# overlap) are fusion_cost=measured's fused variants, not user policies
VARIANTS = ("all_dw_pw", "all_pw_dw")
COSTS = ("model", "measured")


def select(graph, tilings, fused, policy, cands, costs=None):
    """schedule.json. tilings: layer name -> its tiling; fused: group name ->
    (pair view, fused tiling) of every candidate solved; cands: the engine's
    candidates (infeasible ones included, with their reason); costs (for
    min_latency): {"source": how they were obtained, "unit": what they
    count, "layers": {layer: count}, "groups": {group: count or None},
    "missing": why a group has none} or {"source", "none": why none}."""
    if policy not in POLICIES + VARIANTS:
        raise ValueError(f"fusion policy {policy!r}")
    names = [layer.name for layer in graph.layers]
    alone = {layer.name: layer_transfer(tiler_layer(layer, graph), tilings[layer.name]) for layer in graph.layers}
    index = {n: i for i, n in enumerate(names)}
    options = {}     # first layer index -> [(group, bytes, length)]
    recorded = []
    feasible = {}    # group -> ([first, second], fused bytes), for min_memory
    for c in cands:
        group, members = c["group"], c["layers"]
        a, n = members[0], len(members)
        entry = {"group": group, "layers": list(members), "kind": c["kind"], "fusable": c["ok"],
                 "reason": c["reason"], "unfused_bytes": sum(alone[x] for x in members)}
        if c["ok"] and group in fused:
            pair, ft = fused[group]
            if not ft["feasible"]:
                entry.update(fusable=False, reason=ft["reason"])
            else:
                entry["fused_bytes"] = fused_transfer(pair, ft)
                if c["kind"] in ("dw_pw", "pw_dw"):       # min_memory: the DW/PW pairs' intermediates
                    feasible[group] = (list(members), entry["fused_bytes"])
                if policy == f"all_{c['kind']}":
                    options.setdefault(index[a], []).append((group, -1, n))
                elif policy == "min_transfer":
                    options.setdefault(index[a], []).append((group, entry["fused_bytes"], n))
                elif policy == "min_latency" and costs and "layers" in costs:
                    entry["unfused_estimate"] = sum(costs["layers"][x] for x in members)
                    est = costs["groups"].get(group)
                    if est is None:
                        entry.update(fusable=False, reason=costs.get("why", {}).get(group, costs["missing"]))
                    else:
                        entry["fused_estimate"] = est
                        if group in costs.get("held", {}):
                            entry["held"] = costs["held"][group]
                        else:
                            options.setdefault(index[a], []).append((group, est, n))
        recorded.append(entry)
    if policy == "min_memory":
        from .memory import choose
        for group in sorted(choose(graph, feasible)):
            options.setdefault(index[feasible[group][0][0]], []).append((group, -1, 2))
    # what the program minimizes per layer apart
    if policy == "min_latency":
        weight = dict(costs["layers"]) if costs and "layers" in costs else dict.fromkeys(names, 0)
    elif policy in VARIANTS or policy == "min_memory":
        weight = dict.fromkeys(names, 0)
    else:
        weight = alone

    # best[i]: ((cost, groups), steps) for layers [0, i); on equal cost the
    # fewer groups (ties keep layers apart)
    best = [((0, 0), [])] + [None] * len(names)
    for i in range(len(names)):
        (b, g), steps = best[i]
        cand = ((b + weight[names[i]], g), steps + [((names[i],), None)])
        if best[i + 1] is None or cand[0] < best[i + 1][0]:
            best[i + 1] = cand
        for group, moved, length in options.get(i, ()):
            cand = ((b + moved, g + 1), steps + [(tuple(names[i:i + length]), group)])
            j = i + length
            if best[j] is None or cand[0] < best[j][0]:
                best[j] = cand
    chosen = best[len(names)][1]
    by_group = {e["group"]: e for e in recorded}
    steps = []
    for layers, group in chosen:
        if group is None:
            steps.append({"step": layers[0], "kind": "layer", "layers": list(layers),
                          "activation_transfer_bytes": alone[layers[0]]})
        else:
            e = by_group[group]
            e["chosen"] = True
            reason = f"saves {e['unfused_bytes'] - e['fused_bytes']} of {e['unfused_bytes']} activation bytes"
            if policy == "min_memory":
                reason = f"lowers the activation peak (its intermediate lives in L1 only); {reason}"
            if policy == "min_latency":
                reason = (f"estimated {e['fused_estimate']} {costs['unit']} against {e['unfused_estimate']} apart "
                          f"({costs['source']}); {reason}")
            steps.append({"step": group, "kind": e["kind"], "layers": list(layers),
                          "activation_transfer_bytes": e["fused_bytes"], "reason": reason})
    taken = {n: s["step"] for s in steps if s["kind"] != "layer" for n in s["layers"]}   # layer -> chosen group
    for e in recorded:
        if not e.get("chosen"):
            e["chosen"] = False
            if policy == "none":
                e["why_apart"] = "fusion=none"
            elif not e["fusable"]:
                e["why_apart"] = e["reason"]
            elif policy == "min_latency" and not (costs and "layers" in costs):
                e["why_apart"] = (costs or {}).get("none", "no cost estimates")
            elif policy == "min_latency" and "held" in e:
                e["why_apart"] = e.pop("held")
            elif policy == "min_latency" and e["fused_estimate"] < e["unfused_estimate"]:
                # faster than its layers apart, but a group sharing a layer with it won
                e["why_apart"] = (f"estimated {e['fused_estimate']} {costs['unit']} against {e['unfused_estimate']} "
                                  f"apart ({costs['source']}), but the chosen groups it overlaps "
                                  f"({', '.join(sorted({taken[n] for n in e['layers'] if n in taken}))}) are "
                                  f"estimated faster still")
            elif policy == "min_latency":
                e["why_apart"] = (f"estimated {e['fused_estimate']} {costs['unit']}, not fewer than "
                                  f"{e['unfused_estimate']} apart ({costs['source']})")
            elif policy == "min_memory":
                e["why_apart"] = "does not lower the activation peak"
            elif policy == "min_transfer" and e["fused_bytes"] < e["unfused_bytes"]:
                e["why_apart"] = (f"moves {e['fused_bytes']} activation bytes against {e['unfused_bytes']} apart, "
                                  f"but the chosen groups it overlaps "
                                  f"({', '.join(sorted({taken[n] for n in e['layers'] if n in taken}))}) save more")
            else:
                e["why_apart"] = "moves no fewer activation bytes than the layers apart"
    total = sum(s["activation_transfer_bytes"] for s in steps)
    unfused = sum(alone.values())
    out = {"policy": policy, "steps": steps, "candidates": recorded,
            "totals": {"activation_transfer_bytes": total, "unfused_activation_transfer_bytes": unfused,
                       "saved_bytes": unfused - total,
                       "saved_permille": (unfused - total) * 1000 // unfused if unfused else 0}}
    if policy == "min_latency":
        out["costs"] = {k: v for k, v in (costs or {}).items() if k not in ("layers", "groups", "why")}
        if costs and "layers" in costs:
            est = best[len(names)][0][0]
            apart = sum(costs["layers"].values())
            out["totals"].update(estimated_count=est, unfused_estimated_count=apart)
    return out
