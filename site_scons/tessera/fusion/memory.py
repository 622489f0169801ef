"""fusion=min_memory: fuse only where the activation peak needs it.

A fused step's intermediate never exists whole (it lives in L1 only), so
fusing the pair that makes the network's largest tensor (MobileNetV2's
64x64x96 expansion at 128x128) removes it from the activation level; fusing
elsewhere saves no RAM and, where the fused kernel is slower than the
layers apart, costs time. So the policy minimizes the activation floor (per
step the whole tensors live, less what the step's output may overlap of its
consumed input: overlap.step_floors, on the graph the plan sees with the
chosen groups fused) with as few groups as it can:

  1. greedy: while some feasible group, disjoint from those taken, lowers
     (the highest step floor, the number of steps at it), take the one that
     lowers it most (ties: fewer activation bytes moved, then the name);
  2. prune: drop, last taken first, every group whose removal does not
     raise the peak the plan is expected to reach: per step the floor where
     the step overlaps closely (a fused step, by its bands, or a layer cut
     in row bands: overlap.row_band_layers of the unfused graph, as the
     build cuts them), else its whole tensors.

So a pair is fused only where no overlap of the layers apart reaches its
floor and the plan's peak falls with it; elsewhere layers keep their own
tiles (and counts). The plan's peak is the allocator's, at or above the
floor (docs/memory.md).
"""

from ..planning import memplan
from ..planning.overlap import row_band_layers, step_floors


def _act(graph, groups):
    fused = {g: {"layers": layers} for g, layers in groups.items()}
    return memplan._without_intermediates(graph, fused, True) if fused else graph


def _key(graph, groups):
    _, floors = step_floors(_act(graph, groups))
    top = max(floors, default=0)
    return top, floors.count(top)


def _expected(graph, groups, banded):
    act = _act(graph, groups)
    live, floors = step_floors(act)
    close = banded | {layers[0] for layers in groups.values()}
    return max((floors[s] if layer.name in close else live[s] for s, layer in enumerate(act.layers)), default=0)


def choose(graph, options):
    """The groups to fuse. options: {group: ([first, second], activation
    bytes the fused step moves)} of the feasible candidates."""
    taken = {}
    used = set()
    best = _key(graph, taken)
    while True:
        tried = []
        for group in sorted(options):
            layers, moved = options[group]
            if used & set(layers):
                continue
            key = _key(graph, dict(taken, **{group: layers}))
            if key < best:
                tried.append((key, moved, group))
        if not tried:
            break
        best, _, group = min(tried)
        taken[group] = options[group][0]
        used |= set(taken[group])
    banded = set(row_band_layers(graph))
    for group in reversed(list(taken)):
        rest = {g: v for g, v in taken.items() if g != group}
        if _expected(graph, rest, banded) <= _expected(graph, taken, banded):
            taken = rest
    return set(taken)
