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

from .errors import FitError, TesseraError

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


def choose(graph, views, tiler_target, memory, cap, solve, where=""):
    """{"l1_budget", "ram", "tried": [[budget, ram or the reason it failed]]}
    for the largest rung whose total RAM is at most `cap`.

    views: layer name -> the tiler view; solve(view, tiler_target) -> the
    tiling (the build's own solver, so the chosen tilings are reused)."""
    from . import memplan

    usable = tiler_target["l1_budget"]
    tried = []
    for budget in rungs(usable):
        tgt = dict(tiler_target, l1_budget=budget)
        try:
            tilings = {name: dict(solve(v, tgt), layer=name) for name, v in views.items()}
            the_plan = memplan.plan(graph, tilings, memory, memory.get("align", 4), memory.get("fit_hint", ""))
        except FitError as err:
            tried.append([budget, str(err).split(":")[0] + ": does not fit"])
            break   # a smaller budget will not fit either
        ram = total_ram(memplan.memory_report(the_plan))
        tried.append([budget, ram])
        if ram <= cap:
            return {"ram_cap": cap, "l1_budget": budget, "ram": ram, "tried": tried}
    best = min((r for _, r in tried if isinstance(r, int)), default=None)
    steps = ", ".join(f"{b}: {r}" for b, r in tried)
    raise TesseraError(
        where or "ram_cap",
        f"no tile budget makes the firmware fit ram_cap {cap} bytes (tile budget: total RAM: {steps})"
        + (f"; the least is {best}" if best is not None else ""),
        "raise ram_cap, give the target more memory, or choose a smaller model")
