"""tessera.fusion: which depthwise/pointwise pairs run as one fused step.

API
---
    cands = candidates(graph)              # every DW->PW and PW->DW pair, add epilogue (a layer or a
                                           # DW->PW pair and the residual add after it), feasible or not
    ft = solve_dw_pw(pair_view, target)    # CP-SAT tiling of one fused candidate of any kind (tiler)
    moved = layer_transfer(view, tiling)   # L2<->L1 activation bytes of a step (transfer)
    sched = select(graph, tilings, fused, policy)   # schedule.json (selector)

A step is a layer or a fused group; schedule.json lists the steps in
execution order with the reason for each decision, and the activation bytes
moved between L2 and L1 with and without fusion (weights apart).

Policies (`fusion=` on the command line, or `fusion:` in the model YAML):
  none          every layer its own step (the default)
  min_latency   the fused groups that minimize the estimated count
                (fusion_cost=model: the calibrated cost model; measured:
                the unfused and fused variants built and run), never a
                group not estimated faster than its layers apart
  min_transfer  the fused groups that minimize the counted activation bytes
  min_memory    only the fused groups that lower the activation peak (memory.py)
"""

from ..util.cname import tiling_stem  # noqa: F401  (a fused group's tiling file)
from .engine import candidates, pair_view
from .selector import COSTS, POLICIES, VARIANTS, select
from .transfer import fused_transfer, layer_transfer


def solve_dw_pw(pair_view, target):
    """The fused tiling of a candidate pair, DW->PW or PW->DW (its kind)."""
    # imported on use: the fused tiler loads CP-SAT (ortools, pandas), which
    # declaring a build's steps does not need
    from .tiler import solve
    return solve(pair_view, target)


__all__ = ["candidates", "pair_view", "select", "POLICIES", "COSTS", "VARIANTS", "solve_dw_pw", "fused_transfer", "layer_transfer"]
