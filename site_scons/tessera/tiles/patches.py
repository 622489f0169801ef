"""Patched steps: a chain of layers run patch by patch (MCUNetV2's
patch-based inference, StreamNet's cached halos, vMCU's multi-layer
inverted-bottleneck kernel as the one-column case).

A chain is a run of layers in execution order with one input from outside
(tensor 0) and one output (the last layer's); every tensor in between is
read only inside the chain, so it never exists whole: each lives in the
tile level as a buffer of the rows and columns the next patch needs. The
last layer's output is cut into patches of `tile` = (rows, columns); for
each patch, going backwards from the output, every layer computes the
output rows its consumers read (the receptive field: kernel, stride,
padding, clipped at the tensor's borders, what lies outside is that call's
padding), and the chain's input box is copied in.

Halos, the rows and columns neighbouring patches both need, are handled by
a policy:

- `recompute` (MCUNetV2): every patch computes everything it needs, patches
  in row-major order; a tensor's buffer lives only from its producer's call
  to its last reader's, so buffers are reused within a patch;
- `cache` (StreamNet-style, along the rows): patches in column strips, top
  to bottom; a tensor keeps the rows the next patch of its strip reads
  again (shifted to the top of its buffer) and its producer computes only
  the rows below them, so no row is computed twice; column halos between
  strips are recomputed. Every buffer that keeps rows lives across patches.

`program()` turns a chain, a tile and a policy into the ops the generated C
runs, with every buffer's place in the tile level: shift (move kept rows
up), load (a box of the chain's input into its buffer), call (one layer on
buffers), store (the output patch back into the output tensor). The
planner replays the loads and stores against the activation level
(hazard.py); `verify()` replays the ops against the tile level, byte by
byte, and checks every read sees exactly the tensor rows and columns the
geometry says (tests check the arithmetic with the golden model).

A chain view is plain data: {"name", "tensors": [{"name", "shape": [H, W,
C], "esize"}], "layers": [{"name", "op", "kernel", "stride", "pad" (top,
left, bottom, right), "inputs": [tensor index], "output": tensor index}]};
tensor 0 is the chain's input, layer k writes tensor k + 1.
"""

from ..errors import TesseraError

OPS = ("conv2d", "depthwise", "pointwise", "maxpool", "avgpool", "add")
POLICIES = ("recompute", "cache")


class Infeasible(TesseraError):
    """A tile the chain cannot run in (said why)."""


def _align(n, a):
    return -(-n // a) * a


def window(layer, axis, lo, hi, n_in):
    """(i0, i1, pad_before, pad_after): the input range [i0, i1) that
    output range [lo, hi) of `axis` (0: rows, 1: columns) reads, and the
    padding of that call on each side."""
    if layer["op"] == "add":
        return lo, hi, 0, 0
    k, s, p = layer["kernel"][axis], layer["stride"][axis], layer["pad"][axis]
    v0, v1 = lo * s - p, (hi - 1) * s - p + k
    i0, i1 = max(0, v0), min(n_in, v1)
    if i1 <= i0:
        raise Infeasible(f"layer {layer['name']}", f"output {'rows' if axis == 0 else 'columns'} [{lo}, {hi}) "
                         "read only padding", "a larger patch")
    return i0, i1, i0 - v0, v1 - i1


def _consumers(chain):
    out = [[] for _ in chain["tensors"]]
    for k, layer in enumerate(chain["layers"]):
        for t in layer["inputs"]:
            if k not in out[t]:
                out[t].append(k)
    return out


def _union(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return (min(a[0], b[0]), max(a[1], b[1]))


def _cols(chain, c0, c1):
    """Per tensor, the columns a strip of output columns [c0, c1) needs
    (every layer computes all of them: column halos are recomputed)."""
    T = len(chain["tensors"])
    cols = [None] * T
    cols[T - 1] = (c0, c1)
    for layer in reversed(chain["layers"]):
        oc = cols[layer["output"]]
        for t in layer["inputs"]:
            i0, i1, _, _ = window(layer, 1, oc[0], oc[1], chain["tensors"][t]["shape"][1])
            cols[t] = _union(cols[t], (i0, i1))
    return cols


def patches(chain, tile, policy):
    """The output patches [(r0, r1, c0, c1)] in execution order: column
    strips outermost with `cache` (rows are kept down a strip), row-major
    with `recompute`."""
    Ho, Wo, _ = chain["tensors"][-1]["shape"]
    ph, pw = tile
    rows = [(r, min(r + ph, Ho)) for r in range(0, Ho, ph)]
    cols = [(c, min(c + pw, Wo)) for c in range(0, Wo, pw)]
    if policy == "cache":
        return [(r0, r1, c0, c1) for c0, c1 in cols for r0, r1 in rows]
    return [(r0, r1, c0, c1) for r0, r1 in rows for c0, c1 in cols]


def walk(chain, tile, policy):
    """Per patch {"out": (r0, r1, c0, c1), "cols": [per tensor (c0, c1)],
    "held": [per tensor (r0, r1) its buffer holds while the patch runs, or
    None], "comp": [per tensor (r0, r1) computed (tensor 0: loaded), or
    None], "keep": [per tensor (rows dropped from the top, rows kept)]}."""
    if policy not in POLICIES:
        raise ValueError(f"halo policy {policy!r}")
    T = len(chain["tensors"])
    readers = _consumers(chain)
    prev, strip, out, strips = [None] * T, None, [], {}
    for r0, r1, c0, c1 in patches(chain, tile, policy):
        if (c0, c1) not in strips:
            strips[(c0, c1)] = _cols(chain, c0, c1)
        cols = strips[(c0, c1)]
        if (c0, c1) != strip or policy == "recompute":
            prev = [None] * T          # a new strip (or nothing kept): buffers start afresh
        strip = (c0, c1)
        need, held, comp, keep = [None] * T, [None] * T, [None] * T, [(0, 0)] * T
        need[T - 1] = (r0, r1)
        for t in range(T - 1, -1, -1):
            if t != T - 1:
                for k in readers[t]:
                    layer = chain["layers"][k]
                    c = comp[layer["output"]]
                    if c is not None:
                        i0, i1, _, _ = window(layer, 0, c[0], c[1], chain["tensors"][t]["shape"][0])
                        need[t] = _union(need[t], (i0, i1))
            n, p = need[t], prev[t]
            if t == T - 1 or n is None and p is None:
                held[t], comp[t] = n, n
            elif n is None:
                held[t] = p                # nothing needed now: keep what is there
                keep[t] = (0, p[1] - p[0])
            elif p is None or n[0] < p[0] or n[0] > p[1]:
                held[t], comp[t] = n, n
            else:
                held[t] = (n[0], max(n[1], p[1]))
                comp[t] = (p[1], n[1]) if n[1] > p[1] else None
                keep[t] = (n[0] - p[0], p[1] - n[0])
            if policy == "cache" and t != T - 1:
                prev[t] = held[t]
        out.append({"out": (r0, r1, c0, c1), "cols": cols, "held": held, "comp": comp, "keep": keep})
    return out


def _row_bytes(chain, t, cols):
    _, _, C = chain["tensors"][t]["shape"]
    return (cols[1] - cols[0]) * C * chain["tensors"][t]["esize"]


def buffer_sizes(chain, steps):
    """Per tensor, the largest buffer its held rows and columns take."""
    sizes = [0] * len(chain["tensors"])
    for s in steps:
        for t, h in enumerate(s["held"]):
            if h is not None:
                sizes[t] = max(sizes[t], (h[1] - h[0]) * _row_bytes(chain, t, s["cols"][t]))
    return sizes


def _lifetimes(chain, steps):
    """Per tensor but the last, (first, last) phase of a patch its buffer is
    live in (0: shifts and the load, k + 1: layer k's call), the whole patch
    (0, L + 1) for a buffer that keeps rows into the next patch."""
    T, L = len(chain["tensors"]), len(chain["layers"])
    readers = _consumers(chain)
    kept = {t for s in steps for t, (_, k) in enumerate(s["keep"]) if k}
    out = []
    for t in range(T - 1):
        if t in kept:
            out.append((0, L + 1))
        else:
            out.append((0 if t == 0 else t, max(readers[t]) + 1))
    return out


def allocate(sizes, lives, align):
    """Offsets of buffers with lifetimes (first fit, largest first, names
    breaking ties): [(offset, size)], total bytes."""
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    placed = []          # (offset, end, life)
    at = [0] * len(sizes)
    for i in order:
        size = _align(sizes[i], align)
        if not size:
            continue
        clash = sorted((o, e) for o, e, life in placed if life[0] <= lives[i][1] and lives[i][0] <= life[1])
        off = 0
        for o, e in clash:
            if off + size <= o:
                break
            off = max(off, e)
        at[i] = off
        placed.append((off, off + size, lives[i]))
    return at, max((e for _, e, _ in placed), default=0)


def program(chain, tile, policy, align=4, outs=2):
    """The patched step as ops over the tile level (module docstring):
    {"tile", "policy", "patches", "ops", "buffers": {name: [offset, size]},
    "bytes": the buffers' total, "loaded", "stored", "shifted": bytes}.
    Ops: {"op": "shift", "t", "to", "from", "bytes"}, {"op": "load", "rows",
    "cols", "to"} (rows and columns (start, count) of tensor 0), {"op":
    "call", "layer", "in": (offset, rows, cols), "out": (offset, rows,
    cols), "pad": [t, l, b, r]}, {"op": "add", "layer", "a", "b", "out":
    (offset, row stride), "rows", "n"} (per row n elements), {"op":
    "store", "rows", "cols", "from", "buf"}. `outs` output buffers
    alternate (the store of one patch runs while the next computes)."""
    steps = walk(chain, tile, policy)
    T = len(chain["tensors"])
    sizes = buffer_sizes(chain, steps)
    lives = _lifetimes(chain, steps)
    L = len(chain["layers"])
    at, total = allocate(sizes[:T - 1] + [sizes[T - 1]] * outs,
                         lives + [(0, L + 1)] * outs, align)
    base = at[:T - 1]
    out_base = at[T - 1:]
    ops = []
    loaded = stored = shifted = 0
    for p, s in enumerate(steps):
        cols, held, comp = s["cols"], s["held"], s["comp"]
        rb = [_row_bytes(chain, t, cols[t]) for t in range(T)]
        b = p % outs
        for t in range(T - 1):
            drop, kept = s["keep"][t]
            if drop and kept:
                ops.append({"op": "shift", "t": t, "to": base[t], "from": base[t] + drop * rb[t],
                            "bytes": kept * rb[t]})
                shifted += kept * rb[t]

        def where(t, r0):
            if t == T - 1:
                return out_base[b] + (r0 - held[t][0]) * rb[t]
            return base[t] + (r0 - held[t][0]) * rb[t]
        if comp[0] is not None:
            r0, r1 = comp[0]
            ops.append({"op": "load", "rows": (r0, r1 - r0), "cols": (cols[0][0], cols[0][1] - cols[0][0]),
                        "to": where(0, r0)})
            loaded += (r1 - r0) * rb[0]
        for k, layer in enumerate(chain["layers"]):
            o = layer["output"]
            if comp[o] is None:
                continue
            r0, r1 = comp[o]
            oc = cols[o]
            if layer["op"] == "add":
                parts = []
                for t in layer["inputs"]:
                    e = chain["tensors"][t]["esize"]
                    C = chain["tensors"][t]["shape"][2]
                    parts.append((where(t, r0) + (oc[0] - cols[t][0]) * C * e, rb[t]))
                ops.append({"op": "add", "layer": k, "a": parts[0], "b": parts[1], "out": (where(o, r0), rb[o]),
                            "rows": r1 - r0, "n": (oc[1] - oc[0]) * chain["tensors"][o]["shape"][2]})
                continue
            t = layer["inputs"][0]
            i0, i1, pt, pb = window(layer, 0, r0, r1, chain["tensors"][t]["shape"][0])
            j0, j1, pl, pr = window(layer, 1, oc[0], oc[1], chain["tensors"][t]["shape"][1])
            if (j0, j1) != cols[t]:
                raise Infeasible(f"layer {layer['name']}", f"reads columns [{j0}, {j1}) of a buffer holding "
                                 f"[{cols[t][0]}, {cols[t][1]})", "a chain whose tensors have one column reader")
            if not (held[t][0] <= i0 and i1 <= held[t][1]):
                raise AssertionError(f"patch geometry: layer {layer['name']} reads rows [{i0}, {i1}) of a buffer "
                                     f"holding {held[t]}")
            ops.append({"op": "call", "layer": k, "in": (where(t, i0), i1 - i0, j1 - j0),
                        "out": (where(o, r0), r1 - r0, oc[1] - oc[0]), "pad": [pt, pl, pb, pr]})
        r0, r1 = comp[T - 1]
        c0, c1 = cols[T - 1]
        ops.append({"op": "store", "rows": (r0, r1 - r0), "cols": (c0, c1 - c0), "from": out_base[b], "buf": b})
        stored += (r1 - r0) * rb[T - 1]
    buffers = {chain["tensors"][t]["name"]: [base[t], sizes[t]] for t in range(T - 1) if sizes[t]}
    for i in range(outs):
        buffers[f"out{i}"] = [out_base[i], sizes[T - 1]]
    return {"tile": list(tile), "policy": policy, "patches": len(steps), "ops": ops, "buffers": buffers,
            "bytes": total, "loaded": loaded, "stored": stored, "shifted": shifted}


def windows(chain, prog):
    """The step's accesses to the activation level, in order: [(reads,
    writes)] per patch, boxes (h0, h, w0, w, c0, c) of the chain's input
    (reads) and output (writes), as tessera.tiles.geometry.steps_gap and
    the hazard replay take them."""
    Ci = chain["tensors"][0]["shape"][2]
    Co = chain["tensors"][-1]["shape"][2]
    out, reads = [], []
    for o in prog["ops"]:
        if o["op"] == "load":
            reads.append((o["rows"][0], o["rows"][1], o["cols"][0], o["cols"][1], 0, Ci))
        elif o["op"] == "store":
            out.append((reads, [(o["rows"][0], o["rows"][1], o["cols"][0], o["cols"][1], 0, Co)]))
            reads = []
    return out


def calls(chain, prog):
    """Per layer, its calls' (out rows, out cols, in rows, in cols): what
    the cost model prices (tessera.fusion.patch)."""
    out = [[] for _ in chain["layers"]]
    for o in prog["ops"]:
        if o["op"] == "call":
            out[o["layer"]].append((o["out"][1], o["out"][2], o["in"][1], o["in"][2]))
        elif o["op"] == "add":
            C = chain["tensors"][chain["layers"][o["layer"]]["output"]]["shape"][2]
            w = o["n"] // C
            out[o["layer"]].append((o["rows"], w, o["rows"], w))
    return out


def verify(chain, prog, size=None):
    """Replay the ops over the tile level, byte by byte: every byte a call,
    an add or a store reads must hold exactly the tensor, row and column
    the geometry says (written by a load or a call of this step, moved by
    a shift); raises AssertionError naming the op otherwise."""
    import numpy as np

    steps = walk(chain, prog["tile"], prog["policy"])
    T = len(chain["tensors"])
    tag = np.full(max(size or prog["bytes"], 1), -1, dtype=np.int64)

    def code(t, rows, cols):
        r = np.arange(rows[0], rows[1], dtype=np.int64)[:, None]
        c = np.arange(cols[0], cols[1], dtype=np.int64)[None, :]
        return ((t + 1) << 40) | (r << 20) | c

    def region(at, rows, cols, t, stride=None):
        C = chain["tensors"][t]["shape"][2] * chain["tensors"][t]["esize"]
        h, w = rows[1] - rows[0], cols[1] - cols[0]
        stride = stride or w * C
        if at < 0 or at + (h - 1) * stride + w * C > tag.size:
            raise AssertionError(f"patched step {chain['name']}: a buffer of tensor {t} at {at} leaves the "
                                 f"{tag.size} bytes")
        idx = at + np.arange(h)[:, None, None] * stride + np.arange(w)[None, :, None] * C \
            + np.arange(C)[None, None, :]
        return idx

    def put(at, rows, cols, t, stride=None):
        tag[region(at, rows, cols, t, stride)] = code(t, rows, cols)[:, :, None]

    def check(at, rows, cols, t, who, stride=None):
        got = tag[region(at, rows, cols, t, stride)]
        want = code(t, rows, cols)[:, :, None]
        if not (got == want).all():
            bad = np.argwhere(got != want)[0]
            held = int(got[tuple(bad)])
            what = "nothing" if held < 0 else \
                f"tensor {(held >> 40) - 1} row {(held >> 20) & 0xFFFFF} column {held & 0xFFFFF}"
            raise AssertionError(f"patched step {chain['name']}: {who} reads tensor {t} row "
                                 f"{rows[0] + bad[0]} column {cols[0] + bad[1]}, but the buffer holds {what}")
    step = 0
    for i, o in enumerate(prog["ops"]):
        if step >= len(steps):
            raise AssertionError(f"patched step {chain['name']}: op {i} after the last patch's store")
        s = steps[step]
        who = f"op {i} ({o['op']}, patch {step})"
        if o["op"] == "shift":
            tag[o["to"]:o["to"] + o["bytes"]] = tag[o["from"]:o["from"] + o["bytes"]].copy()
        elif o["op"] == "load":
            r0, n = o["rows"]
            c0, m = o["cols"]
            put(o["to"], (r0, r0 + n), (c0, c0 + m), 0)
        elif o["op"] == "call":
            layer = chain["layers"][o["layer"]]
            t, out_t = layer["inputs"][0], layer["output"]
            r0, r1 = s["comp"][out_t]
            c0, c1 = s["cols"][out_t]
            i0, i1, _, _ = window(layer, 0, r0, r1, chain["tensors"][t]["shape"][0])
            j0, j1, _, _ = window(layer, 1, c0, c1, chain["tensors"][t]["shape"][1])
            check(o["in"][0], (i0, i1), (j0, j1), t, who + f" layer {layer['name']}")
            put(o["out"][0], (r0, r1), (c0, c1), out_t)
        elif o["op"] == "add":
            layer = chain["layers"][o["layer"]]
            out_t = layer["output"]
            r0, r1 = s["comp"][out_t]
            cols = s["cols"][out_t]
            for (at, stride), t in zip((o["a"], o["b"]), layer["inputs"]):
                check(at, (r0, r1), cols, t, who + f" layer {layer['name']}", stride)
            put(o["out"][0], (r0, r1), cols, out_t, o["out"][1])
        elif o["op"] == "store":
            r0, n = o["rows"]
            c0, m = o["cols"]
            check(o["from"], (r0, r0 + n), (c0, c0 + m), T - 1, who)
            step += 1
    if step != len(steps):
        raise AssertionError(f"patched step {chain['name']}: {step} of {len(steps)} patches replayed")
    return len(prog["ops"])
