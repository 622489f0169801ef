"""plan_level: static offsets for the buffers of one memory level."""

from ...errors import FitError
from .greedy import plan_greedy
from .lifetimes import (check_plan, live_bytes, normalize, overlap_gaps,
                        overlap_live, peak_of, top_at_steps)


def __getattr__(name):
    # `level.cpsat` still names the solver module, imported on first use
    if name == "cpsat":
        from . import cpsat
        return cpsat
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def plan_level(level, size, steps, buffers, align=4,
               work_limit=None, overlaps=None):
    """Give every buffer an offset in `level` so co-live buffers never overlap.

    level: the level's name (e.g. "L2"); size: its bytes for these buffers.
    steps: layer names in execution order. buffers: dicts with name, size
    (bytes), start and end (the first and last step it is live, inclusive).
    align: every offset and footprint is a multiple of this (a buffer
    takes its size rounded up, so the peak is a multiple of align too).
    work_limit: CP-SAT's deterministic-time bound (None: cpsat.DEFAULT_WORK_LIMIT).
    overlaps: [{"below", "above", "gap"}]: buffer `below` (a layer's output)
    may start `gap` bytes under `above` (its consumed input), over its tail
    (see lifetimes.overlap_gaps); every other co-live pair stays apart.

    The greedy plan comes first; CP-SAT runs only when greedy is above the
    lower bound, starting from it, so "method" names whichever plan won and
    "optimal" is true when the peak meets the bound or CP-SAT proved it.
    "lower_bound" is the tensor-level bound (whole tensors live at once);
    with overlaps the plan may go below it, down to "overlap_bound".
    The size does not steer the search: it is only checked at the end.

    Returns {"level", "size", "offsets", "peak", "lower_bound", "method",
    "optimal"}. Raises FitError when the best plan does not fit in `size`.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"{level}: size must be a non-negative integer, got {size!r}")
    steps = list(steps)
    bufs = normalize(steps, buffers, align)
    gaps = overlap_gaps(bufs, overlaps, align)
    tensor_bound = max(live_bytes(bufs, len(steps)), default=0)
    live = overlap_live(bufs, len(steps), gaps)
    lower = max(live, default=0)

    if lower > size:
        # No arrangement can help: fail before spending any search on it.
        _no_plan_can_fit(level, size, steps, bufs, live, lower)

    g_offsets, g_peak, _ = plan_greedy(bufs, gaps)
    check_plan(bufs, g_offsets, align, gaps)
    offsets, peak, method, optimal = g_offsets, g_peak, "greedy", g_peak == lower
    if bufs and g_peak > lower:
        # Greedy already meeting the lower bound is optimal; only otherwise
        # is the exact search worth its time.
        # CP-SAT (ortools, which loads pandas) imported here, when a plan
        # needs it: declaring a build's steps imports this module
        from . import cpsat
        if work_limit is None:
            work_limit = cpsat.DEFAULT_WORK_LIMIT
        c_offsets, c_peak, proven = cpsat.solve(bufs, lower, g_peak, g_offsets,
                                                work_limit, gaps)
        if c_offsets is not None:
            check_plan(bufs, c_offsets, align, gaps)
            c_peak_check = peak_of(bufs, c_offsets)
            if c_peak_check != c_peak or c_peak > g_peak:
                raise RuntimeError(
                    f"allocator bug: CP-SAT peak {c_peak} (recomputed "
                    f"{c_peak_check}) against greedy {g_peak}")
            offsets, peak, method = c_offsets, c_peak, "cp-sat"
            optimal = proven or c_peak == lower

    if peak > size:
        _best_plan_does_not_fit(level, size, steps, bufs, offsets, peak,
                                lower, optimal)

    return {
        "level": level,
        "size": size,
        "offsets": {b.name: offsets[b.name] for b in sorted(bufs, key=lambda b: b.name)},
        "peak": peak,
        "lower_bound": tensor_bound,
        "overlap_bound": lower,
        "overlaps": len(gaps),
        "method": method,
        "optimal": optimal,
    }


def _largest_live(bufs, step, n=3):
    live = sorted((b for b in bufs if b.start <= step <= b.end),
                  key=lambda b: (-b.size, b.name))
    text = ", ".join(f"{b.name} {b.size} B" for b in live[:n])
    if len(live) > n:
        text += f" and {len(live) - n} more"
    return text


def _fix(level, need):
    return (f"give {level} at least {need} bytes in the target YAML, "
            f"or use a smaller model or input resolution")


def _no_plan_can_fit(level, size, steps, bufs, live, lower):
    step = live.index(lower)  # the first busiest step
    raise FitError(
        where=level,
        what=(f"layer '{steps[step]}' (step {step}) needs {lower} bytes live "
              f"at once ({_largest_live(bufs, step)}) but {level} has {size} "
              f"bytes available; no plan can fit"),
        fix=_fix(level, lower))


def _best_plan_does_not_fit(level, size, steps, bufs, offsets, peak, lower,
                            optimal):
    top = top_at_steps(bufs, offsets, len(steps))
    step = next(t for t, v in enumerate(top) if v > size)  # first overflow
    how = "the optimal plan" if optimal else "the best plan found"
    raise FitError(
        where=level,
        what=(f"layer '{steps[step]}' (step {step}) overflows: {how} needs "
              f"{peak} bytes but {level} has {size} bytes available "
              f"(the live buffers take {lower} bytes at most; the rest is "
              f"fragmentation; live there: {_largest_live(bufs, step)})"),
        fix=_fix(level, peak))
