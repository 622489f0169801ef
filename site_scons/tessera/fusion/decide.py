"""The schedule from the fusion inputs: what the schedule step writes, and
what a ram_cap's budget step judges at each rung (tessera.planning.rambudget), so
both decide alike."""

from .selector import select


def schedule(graph, tilings, fused, decide, reports=(), need=None, l1_budget=None):
    """schedule.json. tilings: layer name -> its tiling (as the tile step
    writes it); fused: group -> (pair view, fused tiling); decide: {"policy",
    "candidates", "cost" (min_latency), "patch" (the patch tiler's view, with
    a RAM need)}; reports: fusion_cost=measured's variant reports; need: a
    ram_cap's budget of activation bytes (patched steps where the steps
    exceed it; min_memory: the least any path meets), l1_budget: the tile
    level's budget the ram_cap chose."""
    costs = None
    if decide["policy"] == "min_latency":
        from . import costs as fcosts

        costs = (fcosts.measured_costs(graph, *reports, cost=decide["cost"]) if reports
                 else fcosts.model_costs(graph, tilings, fused, decide["cost"]))
    out = select(graph, tilings, fused, decide["policy"], decide["candidates"], costs)
    view = decide.get("patch")
    if view is not None and need is None and decide["policy"] != "min_memory" and "capacity" in view:
        need = view["capacity"]     # the activation level is all there is (pipeline.fusion.over_capacity)
    if view is not None and (need is not None or decide["policy"] == "min_memory"):
        out = with_patches(graph, tilings, out, view, need, l1_budget)
    return out


def with_patches(graph, tilings, sched, view, need=None, l1_budget=None):
    """The schedule with patched chains (fusion/patch.py) where a step is
    over `need` (None: min_memory's least)."""
    from . import patch

    ctx = dict(view, tiler=dict(view["tiler"], **({"l1_budget": l1_budget} if l1_budget else {})))
    if need is None:
        steps, record = patch.least_need(graph, sched["steps"], tilings, ctx)
        source = "min_memory: the least activation need any schedule meets"
    else:
        steps, record = patch.plan(graph, sched["steps"], tilings, need, ctx)
        source = ("ram_cap: the activation bytes the cap leaves beside the tile level and the reserved bytes"
                  if l1_budget else "the activation level's usable bytes (activations cannot go anywhere else)")
    out = dict(sched, patched={"need": record["need"], "source": source, "chains_priced": record["evaluated"]})
    if steps is None:
        out["patched"]["fits"] = False
        return out
    out["patched"].update(fits=True, cost=record["cost"])
    chosen = [s for s in steps if s["kind"] == "patch"]
    out["patched"]["steps"] = [s["step"] for s in chosen]
    for s in chosen:
        s["activation_transfer_bytes"] = s["patch"]["loaded"] + s["patch"]["stored"]
    out["steps"] = steps
    total = sum(s["activation_transfer_bytes"] for s in steps)
    unfused = sched["totals"]["unfused_activation_transfer_bytes"]
    out["totals"] = dict(sched["totals"], activation_transfer_bytes=total, saved_bytes=unfused - total,
                         saved_permille=(unfused - total) * 1000 // unfused if unfused else 0)
    return out
