"""Greedy placement: the fast heuristic, the CP-SAT hint and fallback.

TFLite's arena planner idea: take the buffers in some order and put each at
the lowest offset where it does not collide with an already placed buffer
whose lifetime overlaps its own. Any order gives a valid plan; the order
decides the quality. We try a few classic orders and keep the best, which
costs microseconds on real networks and often already meets the lower bound.

Lowest-offset first-fit is also complete: every optimal plan is reproduced
by first-fit over *some* order (sort that plan's buffers by offset), which is
what makes this a fair upper bound and hint for the exact solver.
"""

from .lifetimes import overlap_in_time, peak_of

# (name, sort key). Ties always end on the buffer name so the result is a
# function of the buffer set alone.
ORDERS = (
    ("size", lambda b: (-b.size, b.start, b.name)),
    ("area", lambda b: (-b.size * (b.end - b.start + 1), -b.size, b.start, b.name)),
    ("lifetime", lambda b: (-(b.end - b.start), -b.size, b.start, b.name)),
    ("start", lambda b: (b.start, -b.size, b.name)),
)


def first_fit(bufs_in_order):
    """Place each buffer at the lowest offset clear of placed, co-live ones."""
    placed = []  # (offset, buf)
    offsets = {}
    for b in bufs_in_order:
        if b.size == 0:  # takes no space; any offset is as good as 0
            offsets[b.name] = 0
            continue
        clash = sorted((o, p.size) for o, p in placed if overlap_in_time(b, p))
        cur = 0
        for o, s in clash:
            if o >= cur + b.size:
                break  # the gap below this neighbour is big enough
            cur = max(cur, o + s)
        offsets[b.name] = cur
        placed.append((cur, b))
    return offsets


def plan_greedy(bufs):
    """Best of the classic orders: (offsets, peak, order name)."""
    best = None
    for name, key in ORDERS:
        offsets = first_fit(sorted(bufs, key=key))
        peak = peak_of(bufs, offsets)
        if best is None or peak < best[1]:
            best = (offsets, peak, name)
    if best is None:
        return {}, 0, ORDERS[0][0]
    return best
