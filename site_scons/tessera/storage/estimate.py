"""What the schedule promises, from the replayed timeline (integer ns):

    latency_ns          one frame with this program
    unlimited_ns        the same network with unlimited SRAM: every byte
                        resident, no storage traffic, so the sum of compute
    ratio_x1000         latency over unlimited, times 1000
    lower_bound_ns      no program with these tiles does better (below)
    throughput over `frames` pipelined frames (SwapNN: 10): frames per
                        second times 1000, with this program and unlimited
    per layer           compute_ns, io_ns (its reads and writes as the
                        program issues them), read_bytes, written_bytes,
                        intensity_x1000 = compute / io (SwapNN's normalized
                        arithmetic intensity N), bound: compute | io
    written_bytes       per inference (storage wear, SwapNN section 5.4)

The lower bound: the core computes the layers in order, so layer l starts
after the compute of the layers before it; the reads of layers >= l that
finish before that must sit in the in and w pools at that moment, and the
longest such set of reads is at most a fractional knapsack of them into
the pools' bytes; everything else of layers >= l (reads and writes) runs
on the one channel after layer l starts. Maximized over l, with the total
compute and the total IO.
"""

from . import schedule as sc


def _knapsack_ns(reads, capacity):
    """Longest time reads of at most `capacity` bytes can take (fractional)."""
    total, left = 0.0, capacity
    for t in sorted(reads, key=lambda t: (-t["ns"] / max(t["bytes"], 1), t["id"])):
        if left <= 0:
            break
        take = min(1.0, left / max(t["bytes"], 1))
        total += take * t["ns"]
        left -= t["bytes"]
    return total


def lower_bound(problem, tasks):
    n = len(problem["layers"])
    comp = [0] * n
    io = [0] * n
    reads = [[] for _ in range(n)]
    for t in tasks:
        if t["frame"]:
            continue
        if t["kind"] == "compute":
            comp[t["layer"]] += t["ns"]
        else:
            io[t["layer"]] += t["ns"]
            if t["kind"] == "read":
                reads[t["layer"]].append(t)
    cap = problem["pools"]["in"] + problem["pools"]["w"]
    best = max(sum(comp), sum(io))
    for layer in range(n):
        tail = [t for rs in reads[layer:] for t in rs]
        best = max(best, sum(comp[:layer]) + sum(io[layer:]) - _knapsack_ns(tail, cap))
    return int(best)


def estimate(problem, frames=10, where="program.json"):
    """{one: the one-frame schedule result, many: the pipelined one, summary}."""
    one = sc.schedule(problem, 1, where)
    rep = one["replay"]
    tasks = rep["tasks"]
    n = len(problem["layers"])
    rows = [{"name": layer["name"], "compute_ns": 0, "io_ns": 0, "read_bytes": 0, "written_bytes": 0}
            for layer in problem["layers"]]
    for e in rep["timeline"]:
        t = tasks[e["id"]]
        row = rows[t["layer"]]
        if t["kind"] == "compute":
            row["compute_ns"] += t["ns"]
        else:
            row["io_ns"] += t["ns"]
            row["read_bytes" if t["kind"] == "read" else "written_bytes"] += t["bytes"]
    for row in rows:
        row["intensity_x1000"] = row["compute_ns"] * 1000 // row["io_ns"] if row["io_ns"] else None
        row["bound"] = "compute" if row["compute_ns"] >= row["io_ns"] else "io"
    unlimited = sum(r["compute_ns"] for r in rows)
    many = sc.schedule(problem, frames, where, one) if frames > 1 else one
    span = many["replay"]["end"]
    summary = {
        "latency_ns": rep["end"],
        "unlimited_ns": unlimited,
        "ratio_x1000": rep["end"] * 1000 // unlimited if unlimited else None,
        "lower_bound_ns": lower_bound(problem, tasks),
        "in_order_ns": one["naive_ns"],
        "candidate": one["candidate"],
        "frames": frames,
        "pipelined_ns": span,
        "throughput_fps_x1000": frames * 10**12 // span if span else None,
        "unlimited_fps_x1000": 10**12 // unlimited if unlimited else None,
        "read_bytes": sum(r["read_bytes"] for r in rows),
        "written_bytes": sum(r["written_bytes"] for r in rows),
        "io_bound_layers": [r["name"] for r in rows if r["bound"] == "io"],
        "layers": rows,
    }
    assert len(rows) == n
    return {"one": one, "many": many, "summary": summary}


def report_entry(problem, frames=10, where="out-of-core schedule", policies=None):
    """report.json's out_of_core.schedule: the keys tessera.storage.ooc writes (ms,
    rounded) plus the lower bound, the pools' peaks and the one-frame
    timeline (timeline.bars) that report/timeline.py draws."""
    from . import timeline

    kw = {"policies": policies} if policies else {}
    one = sc.schedule(problem, 1, where, **kw)
    many = sc.schedule(problem, frames, where, one, **kw) if frames > 1 else one
    tasks = one["replay"]["tasks"]
    unlimited = sum(t["ns"] for t in tasks if t["kind"] == "compute")
    end1, end_n = one["replay"]["end"], many["replay"]["end"]
    ms = lambda ns: round(ns / 1e6, 3)  # noqa: E731
    return {"latency_ms": ms(end1), "in_order_ms": ms(one["naive_ns"]), "unlimited_ms": ms(unlimited),
            "latency_vs_unlimited": round(end1 / unlimited, 4) if unlimited else None,
            "lower_bound_ms": ms(lower_bound(problem, tasks)),
            "program": one["candidate"], "pools": dict(problem["pools"]), "pool_peak": one["replay"]["pool_peak"],
            "frames": frames, "pipelined_ms_per_frame": ms(end_n / frames),
            "throughput_fps": round(frames * 1e9 / end_n, 3) if end_n else None,
            "unlimited_fps": round(1e9 / unlimited, 3) if unlimited else None,
            "timeline": timeline.bars(problem, one["replay"])}
