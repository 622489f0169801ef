"""Replaying a program: its timeline, and the proof that it is safe.

A program is what the generated C executes, in order, on one core with one
storage channel:

    READ    {id, pool, region, offset, bytes, buf}  queue a storage read of
            region[offset:offset + bytes] into pool[buf:buf + bytes]; the
            core goes on
    WRITE   {id, region, offset, bytes, src}  queue a write from the tile's
            output buffer at out[src:...]
    WAIT    {id}    the core waits until the last queued transfer `id` completed
    COMPUTE {id, layer, tile, bufs, out}  compute the tile from its reads at
            bufs (pool offsets, one per tile read, in its order) into
            out[out:out + output bytes]

(every op also carries frame, layer and tile; `id` is the task's.)

The channel runs queued transfers one at a time in queue order (FIFO); a
COMPUTE runs on the core from the moment the core reaches it. Replaying
with the task costs gives every task's start and end, so the same walk is
the estimate (latency) and the check. It fails, in one line naming the op,
its task, the buffer and the bytes, when a buffer does not fit its pool, a
buffer is reused while another still holds those bytes (a read buffer is
held from its read's start to the end of its last compute; an output buffer
from its compute's start to the end of its write; a band's output buffer
from its first tile's start to the end of its last tile and writes), a compute uses a buffer
whose read has not completed or that holds other data, a read starts before
a write of the bytes it reads has completed, a write comes before its
compute, or a task never runs.
"""

import bisect
import heapq

from ..errors import TesseraError
from . import tasks as tg


class ProgramError(TesseraError):
    """A program that would compute garbage or overwrite live data."""


def _bytes(pool, offset, size):
    return f"{pool}[{offset}:{offset + size})"


def replay(problem, program, where="program.json", tasks=None):
    """{tasks, timeline: [{op, id, lane, start, end}], end, frame_end,
    pool_peak}, or
    ProgramError. Times in ns."""
    frames = program["frames"]
    tasks = tasks if tasks is not None else tg.build(problem, frames)
    pools = problem["pools"]
    T = io_free = 0
    issued = {}              # task id -> (start, end) of its last issue
    at = {}                  # (pool, offset) -> the last buffer placed there
    bufs = []
    done = set()
    timeline = []

    def fail(i, task, what):
        name = tg.describe(task, problem) if task is not None else "?"
        raise ProgramError(where, f"op {i} ({name}): {what}")

    def task_of(i, op, kind):
        tid = op.get("id")
        if not isinstance(tid, int) or not 0 <= tid < len(tasks):
            fail(i, None, f"no task {tid!r}")
        t = tasks[tid]
        if t["kind"] != kind:
            fail(i, t, f"a {op['op']} of a {t['kind']} task")
        return t

    def new_buf(i, t, pool, offset, size, start, ready):
        if not isinstance(offset, int) or offset < 0 or offset + size > pools[pool]:
            fail(i, t, f"buffer {_bytes(pool, offset, size)} exceeds the {pool} pool ({pools[pool]} B)")
        b = {"pool": pool, "offset": offset, "size": size, "start": start, "ready": ready, "release": ready,
             "data": t["id"], "n": len(bufs)}
        bufs.append(b)
        # an empty buffer holds no bytes: it never hides the one placed there
        at[(pool, offset) if size else (pool, offset, t["id"])] = b
        return b

    for i, op in enumerate(program["ops"]):
        kind = op.get("op")
        if kind == "READ":
            t = task_of(i, op, "read")
            if op.get("pool") != t["pool"]:
                fail(i, t, f"read into the {op.get('pool')} pool, it belongs to the {t['pool']} pool")
            start = max(T, io_free)
            for w in t["deps"]:
                if w not in issued or issued[w][1] > start:
                    fail(i, t, f"reads {tasks[w]['region']}[{max(t['offset'], tasks[w]['offset'])}:"
                               f"{min(t['offset'] + t['bytes'], tasks[w]['offset'] + tasks[w]['bytes'])}) "
                               f"before {tg.describe(tasks[w], problem)} completed")
            end = io_free = start + t["ns"]
            new_buf(i, t, t["pool"], op.get("buf"), t["bytes"], start, end)
            issued[t["id"]] = (start, end)
            timeline.append({"op": i, "id": t["id"], "lane": "io", "start": start, "end": end})
        elif kind == "WRITE":
            t = task_of(i, op, "write")
            if t["compute"] not in done:
                fail(i, t, "written before its compute ran")
            if t["id"] in issued:
                fail(i, t, "written twice")
            owner = tasks[t["compute"]]["owner"]
            b = at.get(("out", op.get("src"))) or at.get(("out", op.get("src"), owner))
            if b is None or b["data"] != owner:
                fail(i, t, f"out[{op.get('src')}] does not hold this tile's output")
            start = max(T, io_free)
            end = io_free = start + t["ns"]
            b["release"] = max(b["release"], end)
            issued[t["id"]] = (start, end)
            timeline.append({"op": i, "id": t["id"], "lane": "io", "start": start, "end": end})
        elif kind == "WAIT":
            tid = op.get("id")
            if tid not in issued:
                fail(i, tasks[tid] if isinstance(tid, int) and 0 <= tid < len(tasks) else None,
                     "waits for a transfer never queued")
            T = max(T, issued[tid][1])
        elif kind == "COMPUTE":
            t = task_of(i, op, "compute")
            if t["id"] in done:
                fail(i, t, "computed twice")
            if len(op.get("bufs", [])) != len(t["reads"]):
                fail(i, t, f"{len(op.get('bufs', []))} input buffers for {len(t['reads'])} reads")
            used = []
            for off, r in zip(op["bufs"], t["reads"]):
                b = at.get((tasks[r]["pool"], off) if tasks[r]["bytes"] else (tasks[r]["pool"], off, r))
                if b is None or b["data"] != r:
                    fail(i, t, f"{tasks[r]['pool']}[{off}] does not hold {tg.describe(tasks[r], problem)}"
                               + (f" (it was overwritten by {tg.describe(tasks[b['data']], problem)})" if b else ""))
                if b["ready"] > T:
                    fail(i, t, f"uses {_bytes(b['pool'], b['offset'], b['size'])} before its read completes "
                               f"(at {b['ready']} ns, the core is at {T} ns: a WAIT is missing)")
                used.append(b)
            start, end = T, T + t["ns"]
            for b in used:
                b["release"] = max(b["release"], end)
            if t["owner"] == t["id"]:
                new_buf(i, t, "out", op.get("out"), t["bytes"], start, end)
            else:
                # a band tile: into its band's buffer, which must still hold the band
                b = at.get(("out", op.get("out"))) or at.get(("out", op.get("out"), t["owner"]))
                if t["owner"] not in done or b is None or b["data"] != t["owner"]:
                    fail(i, t, f"out[{op.get('out')}] does not hold its band's output "
                               f"({tg.describe(tasks[t['owner']], problem)})")
                b["release"] = max(b["release"], end)
            T = end
            done.add(t["id"])
            timeline.append({"op": i, "id": t["id"], "lane": "compute", "start": start, "end": end})
        else:
            raise ProgramError(where, f"op {i}: unknown op {kind!r}")
    for t in tasks:
        if t["kind"] == "compute" and t["id"] not in done or t["kind"] == "write" and t["id"] not in issued:
            raise ProgramError(where, f"{tg.describe(t, problem)} never runs")
    _check_live(bufs, lambda d: tg.describe(tasks[d], problem), where)
    frame_end = [0] * frames
    for e in timeline:
        f = tasks[e["id"]]["frame"]
        frame_end[f] = max(frame_end[f], e["end"])
    return {"tasks": tasks, "timeline": timeline, "end": max(T, io_free), "frame_end": frame_end,
            "pool_peak": _peaks(bufs)}


def _peaks(bufs):
    """The most bytes of each pool held at once."""
    peak = {}
    for pool in tg.POOLS:
        events = sorted([(b["start"], 1, b["size"]) for b in bufs if b["pool"] == pool]
                        + [(b["release"], 0, -b["size"]) for b in bufs if b["pool"] == pool])
        held = best = 0
        for _, _, n in events:      # releases (0) before takes (1) at the same instant
            held += n
            best = max(best, held)
        peak[pool] = best
    return peak


def _check_live(bufs, name, where):
    """No two buffers share a pool byte while both are held. A sweep in
    start order; the held buffers are disjoint (else it already failed), so
    kept sorted by offset, a new one can only overlap its two neighbors."""
    by_pool = {}
    for b in bufs:
        if b["size"]:               # an empty buffer holds no byte
            by_pool.setdefault(b["pool"], []).append(b)
    for pool, items in sorted(by_pool.items()):
        items.sort(key=lambda b: (b["start"], b["n"]))
        expiry, keys, held = [], [], []
        for b in items:
            while expiry and expiry[0][0] <= b["start"]:
                _, _, a = heapq.heappop(expiry)
                i = bisect.bisect_left(keys, (a["offset"], a["n"]))
                del keys[i], held[i]
            key = (b["offset"], b["n"])
            i = bisect.bisect_left(keys, key)
            for a in held[max(i - 1, 0):i + 1]:
                if a["offset"] < b["offset"] + b["size"] and b["offset"] < a["offset"] + a["size"]:
                    lo, hi = max(a["offset"], b["offset"]), min(a["offset"] + a["size"], b["offset"] + b["size"])
                    raise ProgramError(where, f"{name(b['data'])} reuses {pool}[{lo}:{hi}) at {b['start']} ns "
                                       f"while {name(a['data'])} holds it until {a['release']} ns")
            keys.insert(i, key)
            held.insert(i, b)
            heapq.heappush(expiry, (b["release"], b["n"], b))
