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
  2. prune: drop, last taken first, every group whose removal leaves the
     highest floor where it is.

The floor is what segment overlap can reach (docs/memory.md); the plan's
peak is the allocator's, at or above it.
"""

from .. import memplan
from ..overlap import step_floors


def _key(graph, groups):
    fused = {g: {"layers": layers} for g, layers in groups.items()}
    act = memplan._without_intermediates(graph, fused, True) if fused else graph
    _, floors = step_floors(act)
    top = max(floors, default=0)
    return top, floors.count(top)


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
    top = best[0]
    for group in reversed(list(taken)):
        rest = {g: v for g, v in taken.items() if g != group}
        if _key(graph, rest)[0] <= top:
            taken = rest
    return set(taken)
