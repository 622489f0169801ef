"""The schedule from the fusion inputs: what the schedule step writes, and
what a ram_cap's budget step judges at each rung (tessera.planning.rambudget), so
both decide alike."""

from .selector import select


def schedule(graph, tilings, fused, decide, reports=()):
    """schedule.json. tilings: layer name -> its tiling (as the tile step
    writes it); fused: group -> (pair view, fused tiling); decide: {"policy",
    "candidates", "cost" (min_latency)}; reports: fusion_cost=measured's
    variant reports."""
    costs = None
    if decide["policy"] == "min_latency":
        from . import costs as fcosts

        costs = (fcosts.measured_costs(graph, *reports, cost=decide["cost"]) if reports
                 else fcosts.model_costs(graph, tilings, fused, decide["cost"]))
    return select(graph, tilings, fused, decide["policy"], decide["candidates"], costs)
