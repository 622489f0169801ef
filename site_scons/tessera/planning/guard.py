"""`guard=1`: run-time guards on the activation arena (a debug build).

Per layer (step), the bytes of the activation arena that no buffer the
plan keeps live at that step occupies: before the layer runs, the test
harness fills them with a pattern (so a layer that reads a buffer the plan
has already given up reads garbage, and the layer check fails); after it
runs, it checks that the pattern is still there (a canary: a write outside
the planned buffers, a wrong plan or a kernel writing past its window, is
named by layer and offset). The overlap of a layer's output with its
consumed input is live at that step, so segment-level overlap is never
flagged; the replay (hazard.py) proves the finer order at build time.

Occupied at step s: every tensor from its producer (0 for a network input)
to its last reader (the end for an output; a fused step's output from the
step's first layer, which runs the whole step), each bounce buffer of a moved
tensor during its layer, and every weight-stream chunk at all steps (they
are loaded ahead by DMA, so their bytes are never guarded).
"""

from .memplan import _align


def free_ranges(graph, the_plan, held=()):
    """[[offset, bytes], ...] per step: the activation arena's free bytes.
    held: more (first step, last step, offset, bytes) to leave alone (the
    out-of-core program's pools, tessera.storage.firmware)."""
    acts = the_plan["activations"]
    arena = acts["arena"]
    index = {layer.name: i for i, layer in enumerate(graph.layers)}
    n = len(graph.layers)
    bounces = acts.get("spill", {}).get("bounces", {})
    lives = tensor_lives(graph, the_plan) + list(held)
    for name, at in acts["offsets"].items():
        if name not in graph.tensors:        # "<layer>:bounce:<which>"
            step = index[name.split(":bounce:")[0]]
            lives.append((step, step, at, _align(bounces[name])))
    stream = the_plan["weights"].get("stream")
    for chunk in (stream or {}).get("chunks", []):
        lives.append((0, n - 1, chunk["at"], chunk["bytes"]))
    out = []
    for step in range(n):
        busy = sorted((at, at + size) for s, e, at, size in lives if s <= step <= e)
        ranges, cursor = [], 0
        for lo, hi in busy:
            if lo > cursor:
                ranges.append([cursor, min(lo, arena) - cursor])
            cursor = max(cursor, hi)
        if cursor < arena:
            ranges.append([cursor, arena - cursor])
        out.append([r for r in ranges if r[1] > 0])
    return out


def tensor_lives(graph, the_plan):
    """[(first step, last step, offset, bytes)]: each tensor of the
    activation arena, from its producer's step (0 for a network input) to
    its last reader (the end for an output)."""
    offsets = the_plan["activations"]["offsets"]
    spilled = the_plan["activations"].get("spill", {}).get("offsets", {})
    producer, last = graph.producer(), graph.last_use()
    n = len(graph.layers)

    def first_step(i):
        # a fused intermediate (in neither arena) means layer i runs in the
        # step of the layer before it
        while i > 0 and graph.layers[i - 1].output not in offsets and graph.layers[i - 1].output not in spilled:
            i -= 1
        return i
    lives = []
    for name, at in offsets.items():
        if name in graph.tensors:
            start = 0 if name in graph.inputs else first_step(producer.get(name, 0))
            end = n - 1 if name in graph.outputs else last.get(name, start)
            lives.append((start, end, at, _align(graph.tensor(name).nbytes)))
    return lives
