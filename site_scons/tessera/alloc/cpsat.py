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

SEED = 1
# Deterministic-time units. Real networks (near-chains plus residuals) meet
# the lower bound at once; this caps adversarial instances (120 buffers with
# long random lifetimes) at about 2-3 s of wall time on a slow core.
DEFAULT_WORK_LIMIT = 0.5


def solve(bufs, lower, upper, hint, work_limit=DEFAULT_WORK_LIMIT):
    """Minimize the peak of bufs within [lower, upper].

    bufs: aligned Bufs; hint: a valid plan {name: offset} whose peak is
    `upper`. Returns (offsets or None, peak, proven_optimal).
    """
    sized = [b for b in bufs if b.size]
    if not sized:
        return {b.name: 0 for b in bufs}, 0, True
    # Scale by the gcd of the footprints: some optimal plan packs buffers
    # end to end from 0 (push every buffer down as far as it goes), so its
    # offsets are sums of sizes and the scaling loses nothing; smaller
    # numbers make propagation cheaper.
    unit = reduce(gcd, (b.size for b in sized))
    lo = -(-lower // unit)
    hi = upper // unit

    m = cp_model.CpModel()
    peak = m.new_int_var(lo, hi, "peak")
    xs, ys, offs = [], [], {}
    for i, b in enumerate(sized):
        s = b.size // unit
        off = m.new_int_var(0, hi - s, f"off{i}")
        offs[b.name] = off
        xs.append(m.new_fixed_size_interval_var(off, s, f"addr{i}"))
        # lifetime as a constant interval: steps start..end inclusive
        ys.append(m.new_fixed_size_interval_var(b.start, b.end - b.start + 1, f"life{i}"))
        m.add(peak >= off + s)
        m.add_hint(off, hint[b.name] // unit)
    # No hint on the peak itself: measured, it slows the search down.
    m.add_no_overlap_2d(xs, ys)
    m.minimize(peak)

    solver = cp_model.CpSolver()
    p = solver.parameters
    p.num_workers = 1
    p.random_seed = SEED
    p.max_deterministic_time = float(work_limit)
    p.log_search_progress = False
    p.catch_sigint_signal = False   # as in the tiler: Ctrl-C must not end the search early
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
