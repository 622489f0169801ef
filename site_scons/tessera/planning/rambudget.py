"""A cap on the firmware's total RAM (`ram_cap`): the tile level's budget
that fits it.

A larger tile arena means fewer, larger tiles (less copying, fewer kernel
calls: faster); on a target whose tile level is RAM of its own (stm32h7's
DTCM, stm32f4's SRAM2) every byte of it also counts in the total. With a
cap, the budget goes down a fixed ladder of fractions of the tile level
(LADDER),
and the first (largest, fastest) rung whose whole plan fits the cap wins:
each rung tiles every layer and plans memory exactly as the build then
does, so the figure compared with the cap is the one the report shows.

total RAM = per RAM level written at run time: the planned peak (the
activations, the tile arena, weight buffers streaming through) plus the
bytes the target reserves there (stacks, the C runtime's data, code in RAM).
"""

from ..errors import FitError, TesseraError

# fractions of the tile level's usable bytes, in 64ths, largest first (finer
# where the totals of real networks cross typical caps: a quarter and below)
LADDER = (64, 48, 32, 24, 16, 14, 13, 12, 10, 8, 6, 4)


def total_ram(report):
    """The firmware's RAM from memplan.memory_report: sum of `ram`."""
    return sum(m["ram"] for m in report.values() if "ram" in m)


def rungs(usable, align=8):
    """The budgets tried, largest first (distinct, aligned down)."""
    out = []
    for k in LADDER:
        b = usable * k // 64 // align * align
        if b > 0 and b not in out:
            out.append(b)
    return out


def direct_options(graph, tilings, memory):
    """The sets of layers to run in place (tessera.planning.inplace) worth planning,
    most direct first: every eligible layer; those whose kernel order lets
    the output overlap the input at least as closely as their tiles do
    (the others keep a tighter overlap tiled); none."""
    from . import inplace as direct, overlap

    eligible = memory.get("direct", {}).get("eligible", {})
    if not eligible:
        return [{}]
    tighter = {}
    if memory.get("overlap", True):
        tiled_gap = {c["below"]: c["gap"] for c in overlap.candidates(graph, tilings)}
        for name, k in eligible.items():
            layer = graph.layer(name)
            if layer.output in tiled_gap and direct.gap(layer, graph, k) > tiled_gap[layer.output]:
                continue
            tighter[name] = k
    else:
        tighter = dict(eligible)
    out = [dict(eligible)]
    if tighter != eligible:
        out.append(tighter)
    return out + [{}]


def plan_flat(graph, tilings, memory, plan):
    """On a target whose tile level is RAM like the activations' (policy
    "flat": a layer in place is as fast, and saves the copies), the plan
    with the least total RAM among direct_options (ties: more layers
    direct). plan(direct) -> the_plan. Returns the_plan; FitError when
    none fits."""
    from . import memplan

    best, first_err = None, None
    for opt in direct_options(graph, tilings, memory):
        try:
            p = plan(opt)
        except FitError as err:
            first_err = first_err or err
            continue
        ram = total_ram(memplan.memory_report(p))
        if best is None or ram < best[0]:
            best = (ram, p)
    if best is None:
        raise first_err
    return best[1]


def with_fused(memory, sched, fused_tilings):
    """(fused, memory) for memplan.plan from the schedule's fused steps and
    their tilings: fused is group -> {"layers", "l1_total", "bands"}; memory
    loses from its in-place candidates the layers that run fused (and all of
    them beside a PW->DW step, whose plan is not replayed)."""
    fused = {s["step"]: {"layers": s["layers"], "l1_total": fused_tilings[s["step"]]["l1_bytes"]["total"],
                         "bands": fused_tilings[s["step"]]["bands"],
                         # an add epilogue: its producer's tiling (its tiles, the skip buffer)
                         "kind": s["kind"],
                         **({"tiling": fused_tilings[s["step"]]["tiling"]} if s["kind"] == "add" else {})}
             for s in (sched or {"steps": []})["steps"] if s["kind"] != "layer"}
    if fused:
        eligible = memory.get("direct", {}).get("eligible", {})
        inside = {n for g in fused.values() for n in g["layers"]}
        eligible = {n: k for n, k in eligible.items() if n not in inside}
        if not all("bands" in g for g in fused.values()):
            eligible = {}
        memory = dict(memory, direct=dict(memory.get("direct", {}), eligible=eligible))
    return fused, memory


def choose(graph, views, tiler_target, memory, cap, solve, where="", schedule=None):
    """{"l1_budget", "ram", "tried": [[budget, ram or the reason it failed]]}
    for the largest rung whose total RAM is at most `cap`.

    views: layer name -> the tiler view; solve(view, tiler_target) -> the
    tiling (the build's own solver, so the chosen tilings are reused);
    schedule(tilings, tiler_target) -> (schedule, {group: fused tiling}):
    with fusion, the steps the build will run at that budget (their fused
    tiles are in the arena, their layers not in place), so each rung is
    judged by the plan the build then makes."""
    from . import memplan

    usable = tiler_target["l1_budget"]
    tried = []
    policy = memory.get("direct", {}).get("policy", "none")
    for budget in rungs(usable):
        tgt = dict(tiler_target, l1_budget=budget)
        try:
            tilings = {name: dict(solve(v, tgt), layer=name) for name, v in views.items()}
        except FitError as err:
            tried.append([budget, str(err).split(":")[0] + ": does not fit"])
            break
        fused, mem, groups = {}, memory, None
        if schedule is not None:
            sched, fused_tilings = schedule(tilings, tgt)
            fused, mem = with_fused(memory, sched, fused_tilings)
            groups = sorted(fused)
        eligible = mem.get("direct", {}).get("eligible", {})
        # "ram_cap" (a tile level faster than the activations', stm32h7's
        # DTCM): at each budget the tiles first; over the cap, the same
        # budget with the eligible layers in place (from the slower RAM, no
        # arena for them) before any smaller budget (smaller tiles cost
        # copies and calls on every layer). Once every layer runs in place
        # (none fused) the budget no longer matters.
        in_place_opts = [True] if policy == "ram_cap" and eligible else []
        every = set(eligible) >= set(views)

        def plan(direct, mem=mem, fused=fused, tilings=tilings):
            return memplan.plan(graph, tilings, mem, mem.get("align", 4), mem.get("fit_hint", ""),
                                fused or None, direct=direct)
        stop = False
        for in_place in [False] + in_place_opts:
            if in_place and every and any(len(t) > 2 for t in tried):
                continue    # all in place: the same plan as at the larger budget
            try:
                if policy == "flat":
                    the_plan = plan_flat(graph, tilings, mem, plan)
                else:
                    the_plan = plan(eligible if in_place else {})
            except FitError as err:
                tried.append([budget, str(err).split(":")[0] + ": does not fit"] + (["in place"] if in_place else []))
                stop = not in_place     # a smaller budget will not fit either
                continue
            ram = total_ram(memplan.memory_report(the_plan))
            tried.append([budget, ram] + (["in place"] if in_place else []))
            if ram <= cap:
                out = {"ram_cap": cap, "l1_budget": budget, "ram": ram, "tried": tried,
                       "direct": sorted(the_plan.get("direct", {})) if in_place else []}
                if groups is not None:
                    out["fused"] = groups     # the fused steps this total counts
                return out
        if stop:
            break
    best = min((t[1] for t in tried if isinstance(t[1], int)), default=None)
    steps = ", ".join(f"{t[0]}: {t[1]}" + (" (in place)" if len(t) > 2 else "") for t in tried)
    raise TesseraError(
        where or "ram_cap",
        f"no tile budget makes the firmware fit ram_cap {cap} bytes (tile budget: total RAM: {steps})"
        + (f"; the least is {best}" if best is not None else ""),
        "raise ram_cap, give the target more memory, or choose a smaller model")
