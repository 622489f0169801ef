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


def check_plan(bufs, offsets, align):
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
            if not overlap_in_time(a, b):
                continue
            ob = offsets[b.name]
            if oa < ob + b.size and ob < oa + a.size:
                raise RuntimeError(
                    f"allocator bug: '{a.name}' [{oa}, {oa + a.size}) and "
                    f"'{b.name}' [{ob}, {ob + b.size}) are live together "
                    f"and overlap")
