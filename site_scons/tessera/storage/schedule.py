"""The build-time IO/compute scheduler (SwapNN's Algorithm 1, decided
statically, and a little more).

SwapNN runs two loops at run time: the IO loop issues the READY IO task of
highest priority (frame, layer, tile) that gets a buffer from its pool, the
compute loop the READY compute task that gets an output buffer. Here the
same list scheduling runs at build time on the task graph (tasks.py) with
the cost of every task known, so it can be run several times and the best
program kept:

- reads are issued in the order their computes need them and never skip
  one another within a frame (SwapNN's loop may let a later read take the
  last buffer an earlier one needs; in order, a frame always progresses);
- a read runs as soon as its pool has room and the writes it reads
  have completed: this is the look-ahead prefetch, so the next layer's
  weights and first tiles load while the current layer computes;
- SwapNN's own loop (policy "swapnn": any ready read that gets a buffer,
  in priority order, may overtake earlier ones) is a candidate too, as the
  baseline; it may let far-ahead reads take the buffers the current layer
  needs, or deadlock (then it is dropped);
- the IO channel, when both a write and a read could go, follows a policy:
  SwapNN's priority (the older task first), reads first (feed the core), or
  writes first (free output buffers); a window bounds how many computes
  ahead reads may run;
- buffers are byte ranges of their pool, placed first-fit at the lowest
  free offset;
- with several frames (pipelining), at most two are in flight; the younger
  one holds at most its pools less the older one's largest tile (so the
  older always progresses), and under the policy "pipeline" its reads go
  first while the older frame is in an IO-bound layer (SwapNN's
  cross-frame parallelism); the best one-frame program repeated frame
  after frame is a candidate too.

On request, a small graph (one frame, at most exact.MAX_TASKS tasks) is
also solved by CP-SAT (exact.py), as one more candidate.

Every candidate (policy x window) is turned into a program and replayed
(replay.py): the replay's timeline is the estimate and its checks are the
proof. The in-order program (read, compute, write, one tile at a time) is
a candidate too, so the result is never slower than it. Ties keep the
earlier candidate; everything is integer nanoseconds: deterministic.
"""

import heapq

from . import exact
from . import replay as rp
from . import tasks as tg

POLICIES = ("priority", "reads_first", "writes_first", "pipeline", "swapnn")
SWAPNN_LOOK = 64
MULTI_FRAME = ("priority", "pipeline")     # the policies tried with several frames
WINDOWS = (None, 4)
INFLIGHT = 2


class Deadlock(Exception):
    """A candidate stuck: SwapNN's own loop can; the in-order reads should
    not (pool fragmentation aside). The candidate is dropped; the in-order
    program always remains."""


class Pool:
    """Free byte ranges of one pool; first fit at the lowest offset."""

    def __init__(self, size):
        self.free = [[0, size]]

    def total(self):
        return sum(n for _, n in self.free)

    def alloc(self, n):
        if n == 0:
            return 0            # nothing held: any offset
        for i, (o, m) in enumerate(self.free):
            if m >= n:
                if m == n:
                    del self.free[i]
                else:
                    self.free[i] = [o + n, m - n]
                return o
        return None

    def release(self, o, n):
        if n == 0:
            return
        self.free.append([o, n])
        self.free.sort()
        merged = []
        for a, m in self.free:
            if merged and merged[-1][0] + merged[-1][1] == a:
                merged[-1][1] += m
            else:
                merged.append([a, m])
        self.free = merged


def _read_op(t, buf):
    return {"op": "READ", "id": t["id"], "frame": t["frame"], "layer": t["layer"], "tile": t["tile"],
            "pool": t["pool"], "region": t["region"], "offset": t["offset"], "bytes": t["bytes"], "buf": buf}


def _write_op(t, src):
    return {"op": "WRITE", "id": t["id"], "frame": t["frame"], "layer": t["layer"], "tile": t["tile"],
            "region": t["region"], "offset": t["offset"], "bytes": t["bytes"], "src": src}


def _compute_op(t, bufs, out):
    return {"op": "COMPUTE", "id": t["id"], "frame": t["frame"], "layer": t["layer"], "tile": t["tile"],
            "bufs": bufs, "out": out}


def naive_program(problem, frames=1):
    """Read a tile's data, compute it, write it, wait; tile after tile."""
    tasks = tg.build(problem, frames)
    ops = []
    for c in (t for t in tasks if t["kind"] == "compute"):
        nxt = {"in": 0, "w": 0}
        place = {}
        for r in dict.fromkeys(c["reads"]):
            t = tasks[r]
            place[r] = nxt[t["pool"]]
            nxt[t["pool"]] += t["bytes"]
            ops.append(_read_op(t, place[r]))
        ops.extend({"op": "WAIT", "id": r} for r in dict.fromkeys(c["reads"]))
        ops.append(_compute_op(c, [place[r] for r in c["reads"]], 0))
        for w in c["writes"]:
            ops.append(_write_op(tasks[w], 0))
        if c["writes"]:
            ops.append({"op": "WAIT", "id": c["writes"][-1]})
    return {"frames": frames, "ops": ops}


def simulate(problem, tasks, frames, policy, window, inflight=INFLIGHT):
    """One list-scheduling pass: (io order, compute order, place) where
    place maps a read or compute id to its pool offset."""
    pools = {p: Pool(problem["pools"][p]) for p in tg.POOLS}
    reserve = dict.fromkeys(tg.POOLS, 0)
    reads = [[] for _ in range(frames)]
    computes = [[] for _ in range(frames)]
    for t in tasks:
        if t["kind"] == "read":
            reads[t["frame"]].append(t["id"])
        elif t["kind"] == "compute":
            computes[t["frame"]].append(t["id"])
            need = {"in": 0, "w": 0, "out": t["bytes"]}
            for r in dict.fromkeys(t["reads"]):
                need[tasks[r]["pool"]] += tasks[r]["bytes"]
            for p, n in need.items():
                reserve[p] = max(reserve[p], n)
    pos = {c: i for f in range(frames) for i, c in enumerate(computes[f])}
    held = [dict.fromkeys(tg.POOLS, 0) for _ in range(frames)]     # pool bytes each frame holds
    # layers whose IO outweighs their compute: while the older frame is in
    # one, the channel is what limits it, and the younger frame's reads
    # (policy "pipeline") keep the core busy at little cost to it
    per_layer = {}
    for t in tasks:
        if t["frame"] == 0:
            acc = per_layer.setdefault(t["layer"], [0, 0])
            acc[t["kind"] != "compute"] += t["ns"]
    io_heavy = {layer for layer, (comp, io) in per_layer.items() if io > comp}
    todo = [list(reads[f]) for f in range(frames)]      # reads not issued yet, in order
    # SwapNN's own loop: any ready read that gets a buffer, in priority
    # order (a bounded look-ahead here), may overtake the ones before it
    look = SWAPNN_LOOK if policy == "swapnn" else 1
    cnext = [0] * frames          # next compute to run, per frame
    end = {}                      # task id -> end (once started)
    place = {}
    left_users = {t["id"]: len(t["users"]) for t in tasks if t["kind"] == "read"}
    ready_writes = []             # heap (priority, id) of writes whose compute has ended
    deps_left = {t["id"]: len(t["deps"]) for t in tasks if t["kind"] == "read"}
    dependents = {}               # write id -> reads of its bytes
    for t in tasks:
        if t["kind"] == "read":
            for w in t["deps"]:
                dependents.setdefault(w, []).append(t["id"])
    pending = []                  # (end, id): completions still to apply
    io_order, cp_order = [], []
    now = io_busy = cp_busy = 0
    head = 0
    n_io = sum(1 for t in tasks if t["kind"] != "compute")

    # an output buffer is freed when its band's computes and writes have all ended
    out_left = {t["id"]: len(t["band"]["computes"]) + len(t["band"]["writes"]) for t in tasks if "band" in t}

    def out_done(owner):
        out_left[owner] -= 1
        if out_left[owner] == 0:
            pools["out"].release(place[owner], tasks[owner]["bytes"])
            held[tasks[owner]["frame"]]["out"] -= tasks[owner]["bytes"]

    def prio(t):
        return (t["frame"], t["layer"], t["tile"], t["kind"] != "write", t["id"])

    while len(io_order) < n_io or len(cp_order) < len(pos):
        due = sorted(e for e in pending if e[0] <= now)
        pending = [e for e in pending if e[0] > now]
        for _, tid in due:
            t = tasks[tid]
            if t["kind"] == "compute":
                for w in t["writes"]:
                    heapq.heappush(ready_writes, (prio(tasks[w]), w))
                for r in dict.fromkeys(t["reads"]):
                    left_users[r] -= 1
                    if left_users[r] == 0:
                        pools[tasks[r]["pool"]].release(place[r], tasks[r]["bytes"])
                        held[tasks[r]["frame"]][tasks[r]["pool"]] -= tasks[r]["bytes"]
                out_done(t["owner"])
            elif t["kind"] == "write":
                for r in dependents.get(tid, ()):
                    deps_left[r] -= 1
                out_done(tasks[t["compute"]]["owner"])
        while head < frames and cnext[head] == len(computes[head]) and not todo[head]:
            head += 1
        live = range(head, min(head + inflight, frames))
        started = False
        if io_busy <= now:
            pick = None
            order = list(live)
            if policy == "pipeline" and len(order) > 1 and cnext[head] < len(computes[head]) and \
                    tasks[computes[head][cnext[head]]]["layer"] in io_heavy:
                order.reverse()
            for f in order:
                for k, rid in enumerate(todo[f][:look]):
                    r = tasks[rid]
                    if window is not None and pos[r["users"][0]] - cnext[f] >= window:
                        continue
                    if deps_left[r["id"]]:
                        continue
                    pool = pools[r["pool"]]
                    # the younger frame leaves the older one room for its largest tile
                    if f != head and held[f][r["pool"]] + r["bytes"] > problem["pools"][r["pool"]] - reserve[r["pool"]]:
                        continue
                    o = pool.alloc(r["bytes"])
                    if o is None:
                        continue
                    pool.release(o, r["bytes"])     # only a probe: taken below if picked
                    pick, pick_at = r, k
                    break
                if pick:
                    break
            w = tasks[ready_writes[0][1]] if ready_writes else None
            if pick and w:
                if policy == "writes_first" or policy in ("priority", "pipeline", "swapnn") and prio(w) < prio(pick):
                    pick = w
            else:
                pick = pick or w
            if pick is not None:
                if pick["kind"] == "read":
                    place[pick["id"]] = pools[pick["pool"]].alloc(pick["bytes"])
                    held[pick["frame"]][pick["pool"]] += pick["bytes"]
                    del todo[pick["frame"]][pick_at]
                else:
                    heapq.heappop(ready_writes)
                    pending.append((now + pick["ns"], pick["id"]))
                end[pick["id"]] = io_busy = now + pick["ns"]
                io_order.append(pick["id"])
                started = True
        if cp_busy <= now:
            for f in live:
                if cnext[f] == len(computes[f]):
                    continue
                c = tasks[computes[f][cnext[f]]]
                # reads issue in id order on one FIFO channel: the last one ends last
                if look == 1 and c["reads"] and end.get(max(c["reads"]), now + 1) > now:
                    continue
                if look > 1 and any(end.get(r, now + 1) > now for r in c["reads"]):
                    continue
                if f != head and held[f]["out"] + c["bytes"] > problem["pools"]["out"] - reserve["out"]:
                    continue
                # a band tile writes into its band's buffer, already taken
                o = pools["out"].alloc(c["bytes"]) if c["owner"] == c["id"] else place[c["owner"]]
                if o is None:
                    continue
                place[c["id"]] = o
                held[f]["out"] += c["bytes"]
                end[c["id"]] = cp_busy = now + c["ns"]
                pending.append((cp_busy, c["id"]))
                cnext[f] += 1
                cp_order.append(c["id"])
                started = True
                break
        if started:
            continue
        later = [t for t in [io_busy, cp_busy] + [e[0] for e in pending] if t > now]
        if not later:
            raise Deadlock(f"{policy}/{window} stuck at {now} ns")
        now = min(later)
    return io_order, cp_order, place


class Owners:
    """Which buffer last took each byte of a pool: sorted disjoint
    [start, end, owner] ranges."""

    def __init__(self):
        self.ranges = []

    def take(self, offset, size, owner):
        """Give [offset, offset + size) to owner; the previous owners."""
        end = offset + size
        before, keep = set(), []
        for a, b, o in self.ranges:
            if b <= offset or a >= end:
                keep.append((a, b, o))
                continue
            before.add(o)
            if a < offset:
                keep.append((a, offset, o))
            if b > end:
                keep.append((end, b, o))
        if size:
            keep.append((offset, end, owner))
        self.ranges = sorted(keep)
        return sorted(before)


def to_program(problem, tasks, frames, io_order, cp_order, place):
    """The ops the core executes. Each transfer goes right after the compute
    it must follow (its own compute for a write; for a read, the last
    compute using a buffer whose bytes it takes over), keeping channel
    order; before each compute, WAITs for its reads and for the last write
    of any output buffer whose bytes it takes over."""
    cpos = {c: i for i, c in enumerate(cp_order)}
    gate = {}
    owners = {p: Owners() for p in tg.POOLS}
    last_user = {}
    for t in io_order:
        task = tasks[t]
        if task["kind"] != "read":
            continue
        before = owners[task["pool"]].take(place[t], task["bytes"], t)
        gate[t] = max((cpos[last_user[h]] for h in before), default=-1)
        last_user[t] = max(task["users"], key=cpos.get)
    out_wait = {}
    for c in cp_order:
        task = tasks[c]
        if task["owner"] != c:      # a band tile: in its band's buffer, taken by the band's first
            out_wait[c] = []
            continue
        before = owners["out"].take(place[c], task["bytes"], c)
        out_wait[c] = sorted({tasks[h]["band"]["writes"][-1] for h in before if tasks[h]["band"]["writes"]})
    order_gate = []
    for t in io_order:
        task = tasks[t]
        g = cpos[task["compute"]] if task["kind"] == "write" else gate[t]
        order_gate.append(max(g, order_gate[-1]) if order_gate else g)
    ops = []
    k = 0
    issue = {t: i for i, t in enumerate(io_order)}
    waited = -1         # the channel is FIFO: a wait covers every transfer issued before

    def emit_io(upto):
        nonlocal k
        while k < len(io_order) and order_gate[k] <= upto:
            t = tasks[io_order[k]]
            ops.append(_read_op(t, place[t["id"]]) if t["kind"] == "read" else _write_op(t, place[t["compute"]]))
            k += 1

    emit_io(-1)
    for i, c in enumerate(cp_order):
        t = tasks[c]
        need = max(set(t["reads"]) | set(out_wait[c]), key=issue.get, default=None)
        if need is not None and issue[need] > waited:
            ops.append({"op": "WAIT", "id": need})
            waited = issue[need]
        ops.append(_compute_op(t, [place[r] for r in t["reads"]], place[c]))
        emit_io(i)
    if io_order and waited < len(io_order) - 1:     # FIFO: its last transfer ends last
        ops.append({"op": "WAIT", "id": io_order[-1]})
    return {"frames": frames, "ops": ops}


def repeat(program, frames, per_frame):
    """A one-frame program run `frames` times, frame after frame."""
    ops = []
    for f in range(frames):
        for op in program["ops"]:
            ops.append(dict(op, id=op["id"] + f * per_frame, frame=f) if op["op"] != "WAIT"
                       else {"op": "WAIT", "id": op["id"] + f * per_frame})
    return {"frames": frames, "ops": ops}


def schedule(problem, frames=1, where="program.json", one=None, policies=POLICIES, exact_ok=False):
    """The best checked program over the candidates:
    {candidate, program, replay, naive_ns, candidates: {name: ns or None}}.
    With several frames, `one` (this function's result for one frame,
    computed when not given) repeated frame after frame is a candidate, so
    pipelining never loses to running the frames one by one. `policies`
    narrows the candidates (a large network schedules faster). With
    exact_ok, a graph of at most exact.MAX_TASKS tasks (one frame) is also
    solved by CP-SAT, from the best list schedule (slow: not in builds)."""
    tg.validate(problem, where)
    tasks = tg.build(problem, frames)
    if frames == 1:
        naive = naive_program(problem, frames)
        best = ("in-order", naive, rp.replay(problem, naive, where, tasks))
        ends = {"in-order": best[2]["end"]}
    else:
        # the in-order program runs frame after frame: n times one frame's,
        # and the best one-frame program repeated is never slower
        one = one or schedule(problem, 1, where, policies=policies)
        prog = repeat(one["program"], frames, len(tasks) // frames)
        best = ("repeat", prog, rp.replay(problem, prog, where, tasks))
        ends = {"in-order": frames * one["naive_ns"], "repeat": best[2]["end"]}
    for policy in policies:
        # pipelined frames: the window matters little and the graph is long
        # (one frame in flight lets the next frame's reads start during the
        # last writes of the previous one; two share the pools)
        for window, inflight in ([(w, 1) for w in WINDOWS] if frames == 1 else
                                 [(None, 1), (None, INFLIGHT)] if policy == "priority" else
                                 [(None, INFLIGHT)]):
            if policy == "pipeline" and frames == 1 or frames > 1 and policy not in MULTI_FRAME:
                continue
            name = f"{policy}/{'all' if window is None else window}" + (f"/x{inflight}" if frames > 1 else "")
            try:
                io, cp, place = simulate(problem, tasks, frames, policy, window, inflight)
            except Deadlock:
                ends[name] = None
                continue
            prog = to_program(problem, tasks, frames, io, cp, place)
            rep = rp.replay(problem, prog, where, tasks)
            ends[name] = rep["end"]
            if rep["end"] < best[2]["end"]:
                best = (name, prog, rep)
    if frames == 1 and len(tasks) <= exact.MAX_TASKS and exact_ok:
        ops = best[1]["ops"]
        starts = {}
        for e in best[2]["timeline"]:
            starts.setdefault(e["id"], e["start"])      # a re-read (in-order program): its first
        offsets = {op["id"]: op["buf"] if op["op"] == "READ" else op["out"]
                   for op in ops if op["op"] in ("READ", "COMPUTE")}
        found = exact.solve(problem, tasks, hint=(starts, offsets))
        if found:
            io, cp, place, optimal = found
            prog = to_program(problem, tasks, frames, io, cp, place)
            rep = rp.replay(problem, prog, where, tasks)
            name = "cp-sat" + ("" if optimal else "/bounded")
            ends[name] = rep["end"]
            if rep["end"] < best[2]["end"]:
                best = (name, prog, rep)
    return {"candidate": best[0], "program": best[1], "replay": best[2], "naive_ns": ends["in-order"],
            "candidates": ends}
