"""Exact placement: CP-SAT minimizes the peak address.

Each buffer is a rectangle: its lifetime (fixed) by its address range (the
offset is the variable). NoOverlap2D keeps co-live rectangles apart; the
objective is the highest end address. The greedy plan is the hint and the
upper bound, the live-set maximum the lower bound, so the solver usually
proves optimality at once and never returns worse than greedy.

Deterministic: one worker, a fixed seed and a bound on deterministic time
(the solver's own work count), never wall-clock time, so the same buffers
give the same plan on any machine under any load.
"""

from functools import reduce
from math import gcd

from ortools.sat.python import cp_model

from ...util.solver import deterministic_solver

SEED = 1
# Deterministic-time units. Real networks (near-chains plus residuals) meet
# the lower bound at once; this caps adversarial instances (120 buffers with
# long random lifetimes) at about 2-3 s of wall time on a slow core.
DEFAULT_WORK_LIMIT = 0.5


def solve(bufs, lower, upper, hint, work_limit=DEFAULT_WORK_LIMIT, gaps=None):
    """Minimize the peak of bufs within [lower, upper].

    bufs: aligned Bufs; hint: a valid plan {name: offset} whose peak is
    `upper`. gaps: {(below, above): bytes}, pairs allowed to overlap
    (lifetimes.overlap_gaps). Returns (offsets or None, peak, proven_optimal).

    With gaps, time runs in half steps (step s is 2s, 2s + 1): an
    overlapping pair's input ends in the first half of its consumer's step
    and the output starts in the second, so NoOverlap2D leaves the pair to
    its own disjunction (output at least `gap` below, or input entirely
    below) while everything else live at that step still keeps clear of both.
    """
    gaps = gaps or {}
    sized = [b for b in bufs if b.size]
    if not sized:
        return {b.name: 0 for b in bufs}, 0, True
    # Scale by the gcd of the footprints: some optimal plan packs buffers
    # end to end from 0 (push every buffer down as far as it goes), so its
    # offsets are sums of sizes and the scaling loses nothing; smaller
    # numbers make propagation cheaper.
    unit = reduce(gcd, [b.size for b in sized] + [g for g in gaps.values() if g])
    lo = -(-lower // unit)
    hi = upper // unit

    m = cp_model.CpModel()
    peak = m.new_int_var(lo, hi, "peak")
    xs, ys, offs = [], [], {}
    sizes = {b.name: b.size for b in sized}
    for i, b in enumerate(sized):
        s = b.size // unit
        off = m.new_int_var(0, hi - s, f"off{i}")
        offs[b.name] = off
        xs.append(m.new_fixed_size_interval_var(off, s, f"addr{i}"))
        # lifetime as a constant interval: steps start..end inclusive
        if gaps:
            t0 = 2 * b.start + (1 if any(y == b.name for y, _ in gaps) else 0)
            t1 = 2 * b.end + (0 if any(x == b.name for _, x in gaps) else 1)
        else:
            t0, t1 = b.start, b.end
        ys.append(m.new_fixed_size_interval_var(t0, t1 - t0 + 1, f"life{i}"))
        m.add(peak >= off + s)
        m.add_hint(off, hint[b.name] // unit)
    for k, ((y, x), gap) in enumerate(sorted(gaps.items())):
        below = m.new_bool_var(f"below{k}")
        m.add(offs[y] + gap // unit <= offs[x]).only_enforce_if(below)
        m.add(offs[x] + sizes[x] // unit <= offs[y]).only_enforce_if(~below)
    # No hint on the peak itself: measured, it slows the search down.
    m.add_no_overlap_2d(xs, ys)
    m.minimize(peak)

    solver = deterministic_solver(SEED, work_limit)
    status = solver.solve(m)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        offsets = {b.name: 0 for b in bufs}
        for name, off in offs.items():
            offsets[name] = solver.value(off) * unit
        return offsets, solver.value(peak) * unit, status == cp_model.OPTIMAL
    if status == cp_model.UNKNOWN:
        return None, None, False  # ran out of work before any solution
    # The hint is a valid plan inside the bounds, so anything else is a bug.
    raise RuntimeError(f"allocator bug: CP-SAT says {solver.status_name(status)} "
                       f"for a model with a known solution")
