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

from .lifetimes import distance, overlap_in_time, peak_of

# (name, sort key). Ties always end on the buffer name so the result is a
# function of the buffer set alone.
ORDERS = (
    ("size", lambda b: (-b.size, b.start, b.name)),
    ("area", lambda b: (-b.size * (b.end - b.start + 1), -b.size, b.start, b.name)),
    ("lifetime", lambda b: (-(b.end - b.start), -b.size, b.start, b.name)),
    ("start", lambda b: (b.start, -b.size, b.name)),
    # latest first: a layer's output is placed before its input, so the
    # input can go just above it, over the output's tail (bounded overlap)
    ("reverse", lambda b: (-b.start, -b.size, b.name)),
    ("reverse-size", lambda b: (-b.size, -b.start, b.name)),
)


def first_fit(bufs_in_order, gaps=None):
    """Place each buffer at the lowest offset clear of placed, co-live ones
    (gaps: the pairs allowed to overlap, see lifetimes.overlap_gaps)."""
    gaps = gaps or {}
    placed = []  # (offset, buf)
    offsets = {}
    for b in bufs_in_order:
        if b.size == 0:  # takes no space; any offset is as good as 0
            offsets[b.name] = 0
            continue
        # each co-live neighbour forbids the open range (lo, hi) of offsets
        forbidden = sorted((o - distance(b, p, gaps), o + distance(p, b, gaps))
                           for o, p in placed if p.size and overlap_in_time(b, p))
        cur = 0
        for lo, hi in forbidden:
            if cur <= lo:
                break  # the room below this neighbour is big enough
            cur = max(cur, hi)
        offsets[b.name] = cur
        placed.append((cur, b))
    return offsets


def plan_greedy(bufs, gaps=None):
    """Best of the classic orders: (offsets, peak, order name)."""
    best = None
    for name, key in ORDERS:
        if not gaps and name.startswith("reverse"):
            continue   # only useful with overlaps; keeps earlier plans as they were
        offsets = first_fit(sorted(bufs, key=key), gaps)
        peak = peak_of(bufs, offsets)
        if best is None or peak < best[1]:
            best = (offsets, peak, name)
    if best is None:
        return {}, 0, ORDERS[0][0]
    return best
