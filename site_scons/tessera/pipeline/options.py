"""Every choice a network's stages read, decided once from the graph, the
target, the model and the build's variables: the data the glue turns into
Value nodes (docs/architecture.md, "The glue declares, the library
decides").

    opts = network(graph, tcfg, mcfg, library, variables, root)
    opts["tiler"], opts["kernels"]   the tiler's target (numbers, kernel library's section)
    opts["layers"]                   {layer: tiler view}, row bands and storage-level tiles set
    opts["memory"]                   the planner's view: overlap, layers in place, ram_cap
    opts["fusion"]                   policy, candidates, those tiled, the fused scheme
    opts["decide"]                   what the selector reads (with min_latency: its costs)
    opts["judge"]                    with a ram_cap: what the budget step reads, else None
"""

from . import budget, fusion, model, on, on_if_given, plan, report, tiling

# SConstruct's variables the stages read, with their defaults
DEFAULTS = {"overlap": "1", "direct": "1", "ram_cap": "", "tile_cost": "", "guard": "0", "patch": "1", "chw": "1"}


def variables(library):
    """{variable: default} a network's build reads from its environment:
    DEFAULTS and the kernel library's upstream checkout (cmsis_nn=<path>)."""
    up = plan.upstream_variable(library)
    return dict(DEFAULTS, **({up: ""} if up else {}))


def network(graph, tcfg, mcfg, library, given, root):
    """The stages' choices (module docstring); `given`: the values of
    variables(library) in this build."""
    numbers, kernels = tiling.target(tcfg, library, given["tile_cost"])
    overlap_on = on(given["overlap"])
    # with overlap, the layers at the memory peak are cut in row bands
    rows = plan.row_bands(graph, overlap_on)
    up = plan.upstream_variable(library)
    policy = plan.direct_policy(tcfg, library, on(given["direct"]), bool(up and given.get(up)))
    cap = budget.cap(given["ram_cap"], tcfg, mcfg)
    memory = plan.memory(graph, tcfg, library, overlap_on, policy, rows,
                         model.fit_hint(tcfg, model.bundled_targets(root), graph), cap,
                         f"ram_cap of {mcfg['name']} on {tcfg['name']}", chw_on=on(given["chw"]))
    meta = report.cost_meta(tcfg, root)
    flat = memory.get("direct", {}).get("policy") == "flat"
    if flat:
        # what the cost model reads to price the plan's options
        # (planning.rambudget.plan_flat; the coefficients' content, so that a
        # refit replans)
        memory["direct"]["cost"] = {k: tcfg[k] for k in ("name", "kernels", "cores", "place", "dma", "platform",
                                                         "toolchain", "runner", "cost_model") if k in tcfg}
        memory["direct"]["cost_coefficients"] = meta["coefficients"]
    fz = fusion.setup(graph, tcfg, mcfg, meta["coefficients"])
    decide = {"policy": fz["policy"], "candidates": fz["candidates"]}
    if fz["policy"] == "min_latency":
        decide["cost"] = fusion.cost(tcfg, mcfg, meta)
        if flat:
            # what the layers will cost apart there: in place (fusion.costs)
            decide["cost"]["in_place"] = sorted(memory["direct"]["eligible"])
    # (not out of core: the storage program schedules layers and fused pairs, not patches)
    if fz["policy"] != "none" and on(given["patch"]) and "storage" not in memory:
        # a RAM need (min_memory, a ram_cap, activations the target cannot
        # hold otherwise): patched steps where the activations exceed it (fusion/patch.py)
        view = fusion.patch_view(numbers, kernels, memory, meta, tcfg)
        if fz["policy"] == "min_memory" or cap is not None or fusion.over_capacity(graph, view):
            decide["patch"] = view
            fz = dict(fz, chains=fusion.chains(graph))
    # a channel-major pair's layers weigh its price in their tiles
    views = plan.chw_views(plan.layer_views(graph, tcfg, rows), memory)
    return {"tiler": numbers, "kernels": kernels, "layers": views, "memory": memory, "fusion": fz,
            "decide": decide, "judge": budget.judge(views, numbers, memory, fz, decide) if cap is not None else None,
            "guard": on_if_given(given["guard"])}
