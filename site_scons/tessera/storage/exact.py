"""CP-SAT on small problems: the schedule as one model, solved to the
optimum (or to a deterministic work bound), one frame only.

Variables: every task's start; a read's buffer offset in its pool and its
release (the end of its last compute); a compute's output offset and
release (the end of its last write). Constraints: one channel (no overlap
of transfers), one core (no overlap of computes), reads before their
computes, writes after their compute, a read after the writes of its bytes,
and in each pool no two buffers overlapping in bytes while both are held
(NoOverlap2D of offset x lifetime). Objective: the last end.

The answer becomes a program through the same path as the list scheduler's
(channel order, compute order, offsets), so the replay checks it and
measures it like any other candidate (schedule(..., exact_ok=True), graphs
of at most MAX_TASKS tasks). It proves optimality only on tiny graphs: on a
42-task chain, the work bound ends the search at the list scheduler's
answer, which the lower bound puts within 0.6% of the optimum. So builds do
not use it."""

MAX_TASKS = 60
WORK = 20.0


def solve(problem, tasks, work=WORK, hint=None):
    """(io order, compute order, place, optimal) or None when no answer was
    found. hint: ({task id: start}, {task id: offset}) of a known program
    (the list scheduler's best), where the search starts."""
    if any(t["kind"] == "compute" and t["owner"] != t["id"] for t in tasks):
        return None             # band tiles sharing a buffer: not modelled here (the list scheduler's)
    from ortools.sat.python import cp_model      # imported here: a build that never asks pays nothing

    from ..util.solver import deterministic_solver

    horizon = sum(t["ns"] for t in tasks) + 1
    m = cp_model.CpModel()
    start, end, iv = {}, {}, {}
    for t in tasks:
        i = t["id"]
        start[i] = m.NewIntVar(0, horizon, f"s{i}")
        end[i] = m.NewIntVar(0, horizon, f"e{i}")
        iv[i] = m.NewIntervalVar(start[i], t["ns"], end[i], f"i{i}")
    m.AddNoOverlap([iv[t["id"]] for t in tasks if t["kind"] != "compute"])
    m.AddNoOverlap([iv[t["id"]] for t in tasks if t["kind"] == "compute"])
    boxes = {"in": ([], []), "w": ([], []), "out": ([], [])}
    offset = {}
    for t in tasks:
        i = t["id"]
        if t["kind"] == "read":
            for w in t["deps"]:
                m.Add(start[i] >= end[w])
            holders = t["users"]
            pool = t["pool"]
        elif t["kind"] == "compute":
            for r in t["reads"]:
                m.Add(start[i] >= end[r])
            for w in t["writes"]:
                m.Add(start[w] >= end[i])
            holders = t["writes"] or [i]
            pool = "out"
        else:
            continue
        size = t["bytes"]
        release = m.NewIntVar(0, horizon, f"r{i}")
        for h in holders:
            m.Add(release >= end[h])
        m.Add(release >= end[i])
        if size == 0:
            offset[i] = 0
            continue
        offset[i] = m.NewIntVar(0, problem["pools"][pool] - size, f"o{i}")
        x = m.NewIntervalVar(offset[i], size, offset[i] + size, f"x{i}")
        life = m.NewIntVar(0, horizon, f"l{i}")
        y = m.NewIntervalVar(start[i], life, release, f"y{i}")
        boxes[pool][0].append(x)
        boxes[pool][1].append(y)
    for xs, ys in boxes.values():
        if xs:
            m.AddNoOverlap2D(xs, ys)
    if hint:
        starts, offsets = hint
        for i, v in starts.items():
            m.AddHint(start[i], v)
        for i, v in offsets.items():
            if not isinstance(offset.get(i, 0), int):
                m.AddHint(offset[i], v)
    makespan = m.NewIntVar(0, horizon, "makespan")
    m.AddMaxEquality(makespan, [end[t["id"]] for t in tasks])
    m.Minimize(makespan)
    solver = deterministic_solver(seed=1, work_limit=work)
    status = solver.Solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    when = {t["id"]: (solver.Value(start[t["id"]]), t["id"]) for t in tasks}
    io = sorted((t["id"] for t in tasks if t["kind"] != "compute"), key=when.get)
    cp = sorted((t["id"] for t in tasks if t["kind"] == "compute"), key=when.get)
    place = {i: (v if isinstance(v, int) else solver.Value(v)) for i, v in offset.items()}
    return io, cp, place, status == cp_model.OPTIMAL
