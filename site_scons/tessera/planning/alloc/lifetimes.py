"""Buffer lifetimes: validation, live sets, the lower bound, plan checks.

Everything here works on `Buf` records whose `size` is already rounded up to
the alignment: a buffer's footprint in the level is its aligned size, so two
aligned buffers packed end to end stay aligned and every plan's peak is a
multiple of the alignment.
"""

from collections import namedtuple

# raw: the size the caller asked for; size: the aligned footprint.
# start/end: first and last step the buffer is live (inclusive).
Buf = namedtuple("Buf", "name raw size start end")


def align_up(n, align):
    return -(-n // align) * align


def _int(value, what):
    # bool is an int in Python; a True size is a bug upstream, not a 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return value


def normalize(steps, buffers, align):
    """Validate the buffers and return them as Bufs in a canonical order.

    The order (by start, longest first, then name) does not depend on the
    order the caller listed them in, so the plan is a function of the set of
    buffers alone and the build's content signature stays stable.
    """
    align = _int(align, "align")
    if align < 1:
        raise ValueError(f"align must be >= 1, got {align}")
    n = len(steps)
    if len(set(steps)) != n:
        raise ValueError("step names must be unique")
    seen = set()
    out = []
    for b in buffers:
        name = b["name"]
        if not isinstance(name, str) or not name:
            raise ValueError(f"buffer name must be a non-empty string, got {name!r}")
        if name in seen:
            raise ValueError(f"buffer '{name}' is listed twice")
        seen.add(name)
        size = _int(b["size"], f"buffer '{name}' size")
        start = _int(b["start"], f"buffer '{name}' start")
        end = _int(b["end"], f"buffer '{name}' end")
        if size < 0:
            raise ValueError(f"buffer '{name}' has negative size {size}")
        if not 0 <= start <= end < n:
            raise ValueError(
                f"buffer '{name}' lives from step {start} to {end}, "
                f"outside 0..{n - 1} or backwards")
        out.append(Buf(name, size, align_up(size, align), start, end))
    out.sort(key=lambda b: (b.start, -b.end, b.name))
    return out


def overlap_in_time(a, b):
    return a.start <= b.end and b.start <= a.end


def live_bytes(bufs, n_steps):
    """Aligned bytes live at each step."""
    live = [0] * n_steps
    for b in bufs:
        for t in range(b.start, b.end + 1):
            live[t] += b.size
    return live


def lower_bound(bufs, n_steps):
    """No plan can use less than what is live at the busiest step."""
    return max(live_bytes(bufs, n_steps), default=0)


def peak_of(bufs, offsets):
    return max((offsets[b.name] + b.size for b in bufs), default=0)


def top_at_steps(bufs, offsets, n_steps):
    """Highest end address among the buffers live at each step."""
    top = [0] * n_steps
    for b in bufs:
        end = offsets[b.name] + b.size
        for t in range(b.start, b.end + 1):
            top[t] = max(top[t], end)
    return top


def overlap_gaps(bufs, overlaps, align):
    """{(below, above): gap} from [{"below", "above", "gap"}, ...]: buffer
    `below` may start as little as `gap` bytes (aligned up) under `above`'s
    start, overlapping its tail (vMCU's segment-level overlap: a layer's
    output over the part of its input already consumed). Only pairs that
    share exactly one step (the consumer's), and gaps smaller than `below`."""
    by_name = {b.name: b for b in bufs}
    gaps = {}
    for o in overlaps or ():
        y, x = by_name.get(o["below"]), by_name.get(o["above"])
        if y is None or x is None:
            raise ValueError(f"overlap names unknown buffer {o['below']!r} or {o['above']!r}")
        gap = align_up(_int(o["gap"], "overlap gap"), align)
        if gap < 0 or x.end != y.start:
            raise ValueError(f"overlap of {y.name!r} under {x.name!r}: the input must end where the output starts")
        if gap < y.size:
            gaps[(y.name, x.name)] = gap
    return gaps


def distance(a, b, gaps):
    """How far b must start above a when a sits below it."""
    return gaps.get((a.name, b.name), a.size)


def clash(a, oa, b, ob, gaps=None):
    """Whether buffers a at oa and b at ob collide (live together, too close)."""
    if not (a.size and b.size and overlap_in_time(a, b)):
        return False
    gaps = gaps or {}
    return ob - oa < distance(a, b, gaps) and oa - ob < distance(b, a, gaps)


def overlap_live(bufs, n_steps, gaps):
    """Per step, a floor on the bytes live: what is live minus what the one
    overlapping pair of that step can share (min of the input's size and
    the output's size less its gap). Its maximum bounds every plan."""
    live = live_bytes(bufs, n_steps)
    by_name = {b.name: b for b in bufs}
    for (y, x), gap in gaps.items():
        live[by_name[y].start] -= min(by_name[y].size - gap, by_name[x].size)
    return live


def check_plan(bufs, offsets, align, gaps=None):
    """Raise RuntimeError if a plan is invalid (an allocator bug).

    Cheap (quadratic in the buffer count) and run on every plan, whichever
    method produced it: a wrong offset here would corrupt activations on the
    device with no error at all.
    """
    for b in bufs:
        off = offsets[b.name]
        if off < 0 or off % align:
            raise RuntimeError(f"allocator bug: '{b.name}' at unaligned or "
                               f"negative offset {off}")
    live = [b for b in bufs if b.size]
    for i, a in enumerate(live):
        oa = offsets[a.name]
        for b in live[i + 1:]:
            ob = offsets[b.name]
            if clash(a, oa, b, ob, gaps):
                raise RuntimeError(
                    f"allocator bug: '{a.name}' [{oa}, {oa + a.size}) and "
                    f"'{b.name}' [{ob}, {ob + b.size}) are live together "
                    f"and overlap more than allowed")
