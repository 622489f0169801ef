"""The out-of-core problem and its task graph (SwapNN's BuildGraph).

The problem (docs/out_of_core.md, written by the planner; integers only):

    storage  {read_ns_per_kb, write_ns_per_kb, latency_ns, block}: one
             channel; a transfer of n bytes costs latency_ns plus n rounded
             up to whole blocks at the per-KB rate
    pools    {in, w, out}: SRAM bytes of the input, weight and output tile
             pools (SwapNN's split: one pool would deadlock)
    layers   [{name, tiles: [tile]}] in network order, a tile being
             {reads: [{pool: in|w, region, offset, bytes}], compute_ns,
              writes: [{region, offset, bytes}], holds: {in, w, out},
              band: true (optional)}

A tile with `band` writes its output into the previous tile's output
buffer (a storage-level row band gathered in SRAM from its tiles, written
once: docs/out_of_core.md): the band's first tile takes the buffer, its
tiles share it, and it is freed once the band's last tile has computed and
every write of the band has completed (the writes sit on its last tile).

A read is identified by (pool, region, offset, bytes): the same read in
consecutive tiles of a layer is the same data (a weight slice kept across
spatial tiles, an input band kept across channel tiles) and is read once
and held. A region "a:<tensor>" is an activation swapped to storage; a
read of it depends on the writes of the same region whose bytes it overlaps
(within a frame: frames pipeline with their own copies of the activations,
storage being plentiful); any other region ("w:<layer>", the network's
input) is never written.

The task graph, per frame, in priority order (frame, layer, tile): a READ
task per run of consecutive tiles using a read, a COMPUTE task per tile, a
WRITE task per write of the tile.
"""

import bisect

from ..errors import TesseraError

POOLS = ("in", "w", "out")


class ProblemError(TesseraError):
    """An out-of-core problem the scheduler cannot take."""


def io_ns(storage, nbytes, direction):
    """Nanoseconds one transfer of `nbytes` keeps the storage channel busy."""
    block = max(int(storage.get("block", 1)), 1)
    rounded = -(-nbytes // block) * block
    rate = storage["read_ns_per_kb" if direction == "read" else "write_ns_per_kb"]
    return int(storage["latency_ns"]) + -(-rounded * int(rate) // 1024)


def out_bytes(tile):
    return max(tile.get("holds", {}).get("out", 0), sum(w["bytes"] for w in tile["writes"]))


def validate(problem, where="program.json"):
    """One-line errors for a problem no program can run."""
    pools = problem["pools"]
    for name in POOLS:
        if int(pools.get(name, 0)) <= 0:
            raise ProblemError(where, f"pool {name!r} has no bytes", "give every tile pool a size")
    for layer in problem["layers"]:
        for i, tile in enumerate(layer["tiles"]):
            need = {"in": 0, "w": 0, "out": out_bytes(tile)}
            seen = set()
            for r in tile["reads"]:
                if r["pool"] not in ("in", "w"):
                    raise ProblemError(where, f"layer {layer['name']} tile {i}: a read into pool {r['pool']!r}",
                                       "reads go to the in or the w pool")
                key = _key(r)
                if key not in seen:
                    seen.add(key)
                    need[r["pool"]] += r["bytes"]
            if tile.get("band") and (i == 0 or need["out"] > out_bytes(layer["tiles"][_owner(layer, i)])):
                raise ProblemError(where, f"layer {layer['name']} tile {i}: a band tile "
                                   + ("first in its layer" if i == 0 else "larger than its band's buffer"),
                                   "a band continues an earlier tile of the same layer, in its buffer")
            for name, n in need.items():
                if n > pools[name]:
                    raise ProblemError(where, f"layer {layer['name']} tile {i} needs {n} B of the {name} pool "
                                       f"at once, the pool has {pools[name]} B", "smaller tiles or a larger pool")


def _owner(layer, i):
    """The tile whose output buffer tile i writes into (itself unless a band tile)."""
    while i > 0 and layer["tiles"][i].get("band"):
        i -= 1
    return i


def _key(r):
    return (r["pool"], r["region"], r["offset"], r["bytes"])


def build(problem, frames=1):
    """The task graph: a list of tasks (index = id).

    every task: id, kind (read|compute|write), frame, layer, tile, ns
    read:    pool, region, offset, bytes, deps (write ids), users (compute ids)
    compute: reads (read ids, one per tile read, in its order), writes (ids), bytes (output
             buffer it takes: 0 for a band tile), owner (the compute whose buffer it writes:
             itself, or its band's first), band (on an owner: its band's computes and writes)
    write:   compute (id), region, offset, bytes
    """
    st = problem["storage"]
    tasks = []
    for f in range(frames):
        written = {}                 # region -> (sorted [(start, end, write id)] of earlier layers, their ends)
        for li, layer in enumerate(problem["layers"]):
            held = {}                # read key -> read id of the run the previous tile used
            owner = None             # the compute whose output buffer the band shares
            mine_writes = {}
            for ti, tile in enumerate(layer["tiles"]):
                mine = {}
                for r in tile["reads"]:
                    k = _key(r)
                    if k in mine:
                        continue
                    if k in held:
                        mine[k] = held[k]
                        continue
                    t = {"id": len(tasks), "kind": "read", "frame": f, "layer": li, "tile": ti,
                         "pool": r["pool"], "region": r["region"], "offset": r["offset"], "bytes": r["bytes"],
                         "ns": io_ns(st, r["bytes"], "read"), "users": [],
                         "deps": _raw(written.get(r["region"], ([], [])), r["offset"], r["bytes"])}
                    tasks.append(t)
                    mine[k] = t["id"]
                held = mine
                shared = ti > 0 and tile.get("band")
                c = {"id": len(tasks), "kind": "compute", "frame": f, "layer": li, "tile": ti,
                     "ns": int(tile["compute_ns"]), "reads": [mine[_key(r)] for r in tile["reads"]],
                     "bytes": 0 if shared else out_bytes(tile), "writes": []}
                c["owner"] = owner["id"] if shared else c["id"]
                owner = c if not shared else owner
                owner.setdefault("band", {"computes": [], "writes": []})["computes"].append(c["id"])
                tasks.append(c)
                for r in dict.fromkeys(c["reads"]):
                    tasks[r]["users"].append(c["id"])
                for w in tile["writes"]:
                    t = {"id": len(tasks), "kind": "write", "frame": f, "layer": li, "tile": ti,
                         "compute": c["id"], "region": w["region"], "offset": w["offset"], "bytes": w["bytes"],
                         "ns": io_ns(st, w["bytes"], "write")}
                    tasks.append(t)
                    c["writes"].append(t["id"])
                    owner["band"]["writes"].append(t["id"])
                    mine_writes.setdefault(w["region"], []).append((w["offset"], w["offset"] + w["bytes"], t["id"]))
            # a layer's reads see the writes of earlier layers only
            for region, ws in mine_writes.items():
                merged = sorted(written.get(region, ([], []))[0] + ws)
                for a, b in zip(merged, merged[1:]):
                    if b[0] < a[1]:
                        raise ProblemError("program.json", f"layer {layer['name']}: storage {region}"
                                           f"[{b[0]}:{a[1]}) is written twice in a frame",
                                           "give every activation its own storage range")
                written[region] = (merged, [w[1] for w in merged])
    return tasks


def _raw(written, offset, nbytes):
    """Ids of the writes (sorted, disjoint ranges, and their ends)
    overlapping [offset, offset + nbytes)."""
    writes, ends = written
    i = bisect.bisect_right(ends, offset)
    deps = []
    while i < len(writes) and writes[i][0] < offset + nbytes:
        deps.append(writes[i][2])
        i += 1
    return deps


def describe(task, problem):
    """'read conv1 tile 3 w:conv1[0:4096)': a task named for a person."""
    name = problem["layers"][task["layer"]]["name"]
    what = f"{task['kind']} {name} tile {task['tile']}"
    if task["kind"] != "compute":
        what += f" {task['region']}[{task['offset']}:{task['offset'] + task['bytes']})"
    return what + (f" (frame {task['frame']})" if task["frame"] else "")
