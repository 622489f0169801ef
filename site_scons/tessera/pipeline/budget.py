"""ram_cap: one step picks the largest tile budget whose whole plan fits
the cap (planning.rambudget); every layer's and fused candidate's tiling
then reads its choice."""

from ..errors import TesseraError
from ..planning import rambudget
from . import fusion, tiling


def cap(given, tcfg, mcfg):
    """ram_cap= on the command line (`given`), else the model's ram_cap:,
    else the target's; None without one."""
    given = str(given or "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise TesseraError(f"ram_cap={given}", "not a positive number of bytes", "e.g. ram_cap=237773")
        return int(given)
    return mcfg.get("ram_cap") or tcfg.get("ram_cap")


def judge(layer_views, numbers, memory, fz, decide_view):
    """What the budget step reads: the layers' tiler views, the tiler's
    numbers, the memory view (with ram_cap and where) and, when candidates
    are fused, what the build fuses at each rung."""
    out = {"views": layer_views, "tiler": numbers, "memory": memory, "ram_cap": memory["ram_cap"],
           "where": memory["where"]}
    if fz["solved"] or decide_view.get("patch") is not None:
        # the fused (and patched) steps the build will run at each rung count there too
        out["fusion"] = {"decide": decide_view, "scheme": fz["scheme"]}
    return out


def choose(graph, view, kernels, reports):
    """ram_budget.json: the budget step (reports: fusion_cost=measured's
    variant reports)."""
    tgt = dict(view["tiler"], kernels=kernels)
    schedule = fusion.rung_schedule(graph, view["fusion"], reports) if view.get("fusion") else None
    return rambudget.choose(graph, view["views"], tgt, view["memory"], view["ram_cap"], tiling.solve,
                            view["where"], schedule)

