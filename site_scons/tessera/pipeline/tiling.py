"""Tiling: one CP-SAT solve per layer (tessera.tiler).

What a solve reads: the layer's tiler view, with the memory plan's wishes
for it (plan.layer_views: row bands where the activation peak is,
storage-level tiles where a tensor will live on a storage level), and the
target's numbers and kernel library (target). What it writes: the tiling,
and beside it what the solver says about its search (SOLVE_FIELDS).
"""

from .. import cost
from ..config import views
from ..errors import TesseraError
from ..util import canon

# what the solver reports about its search rather than the tiling itself: it
# changes with the L1 size even when the chosen tile does not, so it goes to
# a side file only the report reads, and unchanged tilings stay byte-identical
SOLVE_FIELDS = ("l1_budget", "objective", "optimal")


def target(tcfg, library, tile_cost=""):
    """(numbers, kernels): the tiler's view of the target, the kernel
    library's tiler section apart from the target's few numbers (so that
    --debug=explain shows a changed budget as a short line). With
    tile_cost=model the cost model's coefficients pick the tiles
    (tiler/costed.py); without tile_cost= the kernel library decides
    (its tiler.tile_cost: pulp_nn's tiles are the model's where the
    target has coefficients)."""
    from ..tiler import library as tiler_library

    tview = views.tiler_target(tcfg, library)
    numbers = {k: v for k, v in tview.items() if k != "kernels"}
    if not tile_cost and tiler_library.tile_cost(tview["kernels"]) == "model" \
            and cost.coefficients(tcfg) is not None:
        tile_cost = "model"
    if tile_cost == "model":
        coefs = cost.coefficients(tcfg)
        if coefs is None:
            raise TesseraError("tile_cost=model", f"no cost model coefficients for {tcfg['kernels']} on "
                               f"{tcfg['name']}", f"build with tile_cost=library, or fit them with "
                               f"tools/fit_cost_model.py {tcfg['name']} (a target whose runner counts QEMU "
                               f"instructions or GVSoC cycles)")
        numbers["cost"] = {"coefficients": coefs, "dims": cost.api._dims(tcfg)}
    return numbers, tview["kernels"]


# Solved tilings of this process, by the layer's view without its name:
# MobileNets repeat shapes, and the tiler's answer is a function of the view
# (its optimum is unique, ties broken by a fixed order), so a repeat takes
# the first solve's answer under its own name, the same bytes a solve gives.
_solved = {}


def solve(layer, tgt):
    """The tiler's answer for a layer view and a target, once per distinct
    pair (the tile step and the ram_cap budget step share it)."""
    from ..tiler import solve_layer

    key = canon.dumps([{k: v for k, v in layer.items() if k != "name"}, tgt])
    if key not in _solved:
        _solved[key] = solve_layer(layer, tgt)
    return dict(_solved[key], layer=layer["name"])


def with_budget(numbers, kernels, budget=None):
    """The target a solve reads: `budget` is ram_budget.json when a
    ram_cap chose the tile budget."""
    tgt = dict(numbers, kernels=kernels)
    if budget is not None:
        tgt["l1_budget"] = budget["l1_budget"]
    return tgt


def tile(layer, numbers, kernels, budget=None):
    """The tile step: (tiling, the solver's side file, with why the tile
    is what it is: tiler.explain)."""
    from ..tiler import explain

    tgt = with_budget(numbers, kernels, budget)
    result = solve(layer, tgt)
    tiling = {k: v for k, v in result.items() if k not in SOLVE_FIELDS}
    return tiling, dict({k: result[k] for k in SOLVE_FIELDS + ("layer",)}, why=explain(layer, tgt, tiling))
