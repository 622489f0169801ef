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
    (the others keep a tighter overlap tiled); each of these with its
    depthwise layers run by rows ("depthwise_rows") run in one call
    instead, or tiled; none."""
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
    # a depthwise layer run a band of rows per call sets its filters up on
    # every call (dscnn_kws: about twice its count): run in one call (its
    # output apart from its input, no arena) or tiled instead, for
    # plan_flat's pricing
    for opt in list(out):
        for variant in ({n: "depthwise" if k == "depthwise_rows" else k for n, k in opt.items()},
                        {n: k for n, k in opt.items() if k != "depthwise_rows"}):
            if variant != opt and variant not in out:
                out.append(variant)
    return out + [{}]


# plan_flat's pricing: an option estimated within this fraction of the
# fastest one's count is as fast (the cost model's own error)
PRICE_TOLERANCE = 0.01


def estimate_plan(cost_target, graph, tilings, the_plan):
    """The cost model's count of every layer at its tiling under the_plan
    (its layers in place run with no copies, their calls as tessera.direct
    makes them), or None without coefficients."""
    from ..cost import api

    total = 0
    for layer in graph.layers:
        n = api.estimate_layer(cost_target, layer, graph, tilings[layer.name], plan=the_plan)
        if n is None:
            return None
        total += n
    return total


def plan_flat(graph, tilings, memory, plan, cap=None):
    """On a target whose tile level is RAM like the activations' (policy
    "flat": a layer in place saves the copies and the arena), the plan
    with the least total RAM among direct_options (ties: more layers
    direct) of those the cost model prices no slower than the fastest
    (within PRICE_TOLERANCE; memory["direct"]["cost"], the target the cost
    model reads: a depthwise run a row per call can double its count).
    Under a RAM cap, the same among the options that meet it (when none
    does, the least RAM). plan(direct) -> the_plan. Returns the_plan;
    FitError when none fits."""
    from . import memplan

    cost_target = memory.get("direct", {}).get("cost")
    fits, first_err = [], None
    for opt in direct_options(graph, tilings, memory):
        try:
            p = plan(opt)
        except FitError as err:
            first_err = first_err or err
            continue
        est = estimate_plan(cost_target, graph, tilings, p) if cost_target else None
        fits.append((total_ram(memplan.memory_report(p)), est, p))
    if not fits:
        raise first_err
    if cap is not None and any(ram <= cap for ram, _, _ in fits):
        fits = [f for f in fits if f[0] <= cap]
    elif cap is None and any("depthwise_rows" not in p.get("direct", {}).values() for _, _, p in fits):
        # rows cost a filter set-up per call the cost model prices on
        # stm32f4's sweeps only: without a cap asking for them, never
        fits = [f for f in fits if "depthwise_rows" not in f[2].get("direct", {}).values()]
    if all(est is not None for _, est, _ in fits):
        fastest = min(est for _, est, _ in fits)
        fits = [f for f in fits if f[1] <= fastest * (1 + PRICE_TOLERANCE)]
    best = None
    for ram, _, p in fits:      # in direct_options' order: most direct first on a tie
        if best is None or ram < best[0]:
            best = (ram, p)
    return best[1]


def with_fused(memory, sched, fused_tilings, graph=None):
    """(fused, memory) for memplan.plan from the schedule's fused steps and
    their tilings: fused is group -> {"layers", "l1_total", "bands"} (a
    patched step: "windows", its patches' boxes, from `graph`); memory
    loses from its in-place candidates the layers that run fused (and all of
    them beside a step whose plan is not replayed)."""
    fused = {}
    for s in (sched or {"steps": []})["steps"]:
        if s["kind"] == "layer":
            continue
        if s["kind"] == "patch":
            from ..tiler.patch import step_program
            from ..tiles.patches import windows

            chain, prog = step_program(graph, s)
            fused[s["step"]] = {"layers": s["layers"], "kind": "patch", "l1_total": s["patch"]["l1_bytes"]["total"],
                                "windows": windows(chain, prog), "patch": s["patch"],
                                "program": (chain, prog)}     # (for the replay; not in memplan.json)
            continue
        ft = fused_tilings[s["step"]]
        fused[s["step"]] = {"layers": s["layers"], "l1_total": ft["l1_bytes"]["total"], "bands": ft["bands"],
                            # an add epilogue: its producer's tiling (its tiles, the skip buffer)
                            "kind": s["kind"], **({"tiling": ft["tiling"]} if s["kind"] == "add" else {})}
    if fused:
        eligible = memory.get("direct", {}).get("eligible", {})
        inside = {n for g in fused.values() for n in g["layers"]}
        eligible = {n: k for n, k in eligible.items() if n not in inside}
        if not all(replayed(g) for g in fused.values()):
            eligible = {}
        memory = dict(memory, direct=dict(memory.get("direct", {}), eligible=eligible))
    return fused, memory


def replayed(group):
    """Whether the hazard replay walks a fused step (its bands or patches)."""
    return "bands" in group or "windows" in group


def _reserved(memory):
    """The bytes the target reserves in the levels the RAM total counts
    (activations and tiles)."""
    place, levels = memory["place"], memory["levels"]
    names = {place["activations"], place["tiles"]}
    return sum(levels[n]["size"] - levels[n]["usable"] for n in names)


def choose(graph, views, tiler_target, memory, cap, solve, where="", schedule=None):
    """{"l1_budget", "ram", "tried": [[budget, ram or the reason it failed]]}
    for the largest rung whose total RAM is at most `cap`.

    views: layer name -> the tiler view; solve(view, tiler_target) -> the
    tiling (the build's own solver, so the chosen tilings are reused);
    schedule(tilings, tiler_target, need=None, patch_l1=None) -> (schedule,
    {group: fused tiling}): with fusion, the steps the build will run at that budget
    (their fused tiles are in the arena, their layers not in place), so each
    rung is judged by the plan the build then makes.

    When no rung fits with the layers as they are, and the schedule can
    patch (fusion/patch.py), each rung is tried again with patched steps
    where the activations exceed what the cap leaves them (the cap less the
    reserved bytes and the rung's tile budget): the rungs in order of the
    schedule's estimated count, the first whose plan fits wins
    (`patch_need` and `patched` in the answer)."""
    from . import memplan

    usable = tiler_target["l1_budget"]
    tried = []
    policy = memory.get("direct", {}).get("policy", "none")
    solved = {}
    for budget in rungs(usable):
        tgt = dict(tiler_target, l1_budget=budget)
        try:
            tilings = {name: dict(solve(v, tgt), layer=name) for name, v in views.items()}
        except FitError as err:
            tried.append([budget, str(err).split(":")[0] + ": does not fit"])
            break
        solved[budget] = tilings
        fused, mem, groups = {}, memory, None
        if schedule is not None:
            sched, fused_tilings = schedule(tilings, tgt)
            fused, mem = with_fused(memory, sched, fused_tilings, graph)
            groups = sorted(fused)
        found, stop = _fits(graph, tilings, mem, fused, policy, views, cap, budget, tried)
        if found is not None:
            out = {"ram_cap": cap, "l1_budget": budget, **found}
            if groups is not None:
                out["fused"] = groups     # the fused steps this total counts
            return out
        if stop:
            break
    if schedule is not None and getattr(schedule, "patches", False):
        found = _with_patches(graph, solved, tiler_target, memory, cap, schedule, policy, views, tried)
        if found is not None:
            return found
    best = min((t[1] for t in tried if isinstance(t[1], int)), default=None)
    steps = ", ".join(f"{t[0]}: {t[1]}" + (" (" + ", ".join(t[2:]) + ")" if len(t) > 2 else "") for t in tried)
    raise TesseraError(
        where or "ram_cap",
        f"no tile budget makes the firmware fit ram_cap {cap} bytes ("
        + (f"the least is {best}; " if best is not None else "") + f"tile budget: total RAM: {steps})",
        "raise ram_cap, give the target more memory, or choose a smaller model")


def _fits(graph, tilings, mem, fused, policy, views, cap, budget, tried, note=()):
    """({"ram", "tried", "direct"} of the first plan at this rung within
    the cap: tiled, then (policy ram_cap) with the eligible layers in place;
    None if neither), and whether a smaller rung cannot fit either."""
    from . import memplan

    eligible = mem.get("direct", {}).get("eligible", {})
    # "ram_cap" (a tile level faster than the activations', stm32h7's
    # DTCM): at each budget the tiles first; over the cap, the same
    # budget with the eligible layers in place (from the slower RAM, no
    # arena for them) before any smaller budget (smaller tiles cost
    # copies and calls on every layer). Once every layer runs in place
    # (none fused) the budget no longer matters.
    in_place_opts = [True] if policy == "ram_cap" and eligible else []
    every = set(eligible) >= set(views)

    def plan(direct):
        return memplan.plan(graph, tilings, mem, mem.get("align", 4), mem.get("fit_hint", ""), fused or None,
                            direct=direct)
    stop = False
    for in_place in [False] + in_place_opts:
        if in_place and every and any(len(t) > 2 and "in place" in t for t in tried):
            continue    # all in place: the same plan as at the larger budget
        try:
            if policy == "flat":
                the_plan = plan_flat(graph, tilings, mem, plan, cap)
            else:
                the_plan = plan(eligible if in_place else {})
        except FitError as err:
            tried.append([budget, str(err).split(":")[0] + ": does not fit"] + (["in place"] if in_place else [])
                         + list(note))
            stop = not in_place     # a smaller budget will not fit either
            continue
        ram = total_ram(memplan.memory_report(the_plan))
        tried.append([budget, ram] + (["in place"] if in_place else []) + list(note))
        if ram <= cap:
            return {"ram": ram, "tried": tried,
                    "direct": sorted(the_plan.get("direct", {})) if in_place else []}, stop
    return None, stop


def _with_patches(graph, solved, tiler_target, memory, cap, schedule, policy, views, tried):
    """The second pass of choose(): patched steps under each rung's need,
    the rungs in order of their schedules' estimated counts. What the cap
    leaves beside the reserved bytes is split between the activations (the
    need) and the tile level (the patched steps' budget): the rung's whole
    budget, what the layers' tiles take there, or a half or a quarter of
    it all (the layers in place need little more than their scratch)."""
    reserved = _reserved(memory)
    ranked = []
    for budget, tilings in solved.items():
        arena = max(t["l1_bytes"]["total"] for t in tilings.values())
        room_all = cap - reserved
        for room in sorted({r for r in (budget, arena, room_all // 2, room_all // 4) if 0 < r <= budget},
                           reverse=True):
            need = cap - reserved - room
            if need <= 0:
                continue
            tgt = dict(tiler_target, l1_budget=budget)
            sched, fused_tilings = schedule(tilings, tgt, need, room)
            if not sched.get("patched", {}).get("fits"):
                tried.append([budget, f"no schedule keeps the activations within {need} bytes", "patched"])
                continue
            ranked.append((sched["patched"]["cost"], -budget, -room, budget, room, need, sched, fused_tilings))
    for _, _, _, budget, room, need, sched, fused_tilings in sorted(ranked, key=lambda r: r[:3]):
        fused, mem = with_fused(memory, sched, fused_tilings, graph)
        found, _ = _fits(graph, solved[budget], mem, fused, policy, views, cap, budget, tried,
                         [f"patched, need {need}"])
        if found is not None:
            return {"ram_cap": cap, "l1_budget": budget, **found, "fused": sorted(fused), "patch_need": need,
                    "patch_l1": room, "patched": sched["patched"]["steps"]}
    return None
