"""The build-time proof that the memory plan is safe: replay the schedule.

Every layer's generated code (codegen/layer.py, codegen/whole.py) moves data
in a fixed order; this replays that order over the planned addresses of the
activation level, byte by byte, and stops the build naming the layer, the
tile and the address when a byte is read after something else overwrote it.
It holds whatever the allocator did: tensor lifetimes, bounded overlap of a
layer's output with its consumed input, bounce buffers, the application's
input and output.

Timing of a tiled layer (double buffered, see codegen/layer.py):
  load(0); for i: wait in(i); load(i+1); wait out(i-2); compute(i); store(i)
Tile i+1's input DMA is issued before tile i computes but may still be in
flight when tile i's write-back starts, and a write-back may land any time
after its compute. So, conservatively, in the activation level the events
are ordered
  read(0), write(0), read(1), write(1), ...
a byte written by tile i must not be read by any later tile j > i (it may
be read by tile i itself and earlier tiles: their reads completed before
tile i computed). A whole-tensor layer reads everything, then writes.
The next layer starts after the last write-back has landed.

Weights streamed through the activation level (GAP8: L3 -> L2 -> L1,
tile.h's tsr_wstream_next) are replayed with it: a layer asks for chunk k
when it loads the first tile of that chunk's channels (a fused step asks
for both layers' chunks before its first band); chunk k must then hold
what was loaded, and chunk k + 1 starts loading: its bytes are written at
once (it may land any time before it is asked for, so the earliest is the
conservative moment). Every later tile loading weights from chunk k checks
it again (its copy to L1 runs while the tile before it is written back).

In the tile level the same replay covers the double buffers:
  prefetch(i+1) lands while compute(i) reads in[i%2] and writes out[i%2],
  and write-back(i) reads out[i%2] until the wait before compute(i+2).

Each byte of a level holds a tag (which tensor or tile buffer wrote it, and
when); a read checks a strided box of tags at once (numpy views of the box
in its HWC tensor), so the cost is a few array operations per tile, not a
Python loop per byte.
"""

from .. import ir
from ..errors import TesseraError
from ..tiler import tiles as tile_list
from ..config.views import is_whole, tiler_layer


class HazardError(TesseraError):
    """The schedule would read a byte after it was overwritten (a planner bug,
    or a hand-made plan that overlaps too much)."""


FREE = -1          # never written


class Level:
    """One memory level's bytes: who wrote each (a tag id) and when."""

    def __init__(self, name, nbytes):
        import numpy as np   # here: the plan step needs it, declaring the steps does not

        self.name = name
        self.tag = np.full(max(int(nbytes), 1), FREE, dtype=np.int32)
        self.writer = np.full(max(int(nbytes), 1), FREE, dtype=np.int32)
        self.tags = []      # tag id -> description
        self.writers = []   # writer id -> "layer X tile i"
        self._tag_ids = {}

    def tag_id(self, what):
        if what not in self._tag_ids:
            self._tag_ids[what] = len(self.tags)
            self.tags.append(what)
        return self._tag_ids[what]

    def writer_id(self, who):
        self.writers.append(who)
        return len(self.writers) - 1

    def _view(self, box, arr):
        off, (H, W, C), e, (h0, h, w0, w, c0, c) = box
        end = off + H * W * C * e
        if off < 0 or end > arr.size:
            raise HazardError(f"{self.name}", f"a {H}x{W}x{C} tensor at offset {off} ends at {end}, "
                              f"outside the level's {arr.size} planned bytes",
                              "this is a memory planner bug; report the model")
        return arr[off:end].reshape(H, W, C * e)[h0:h0 + h, w0:w0 + w, c0 * e:(c0 + c) * e]

    def write(self, box, what, who):
        self._view(box, self.tag)[...] = self.tag_id(what)
        self._view(box, self.writer)[...] = self.writer_id(who)

    def read(self, box, what, who):
        tags = self._view(box, self.tag)
        want = self.tag_id(what)
        bad = tags != want
        if not bad.any():
            return
        # the first bad byte, as an address in the level
        h, w, b = (int(v[0]) for v in bad.nonzero())
        off, (H, W, C), e, (h0, _, w0, _, c0, _) = box
        addr = off + ((h0 + h) * W + (w0 + w)) * C * e + c0 * e + b
        held = int(self.tag[addr])
        if held == FREE:
            how = "it was never written"
        else:
            how = f"it holds {self.tags[held]}, written by {self.writers[int(self.writer[addr])]}"
        where = (f"byte {addr - off} of the {C}-byte buffer at {off}" if (H, W, e) == (1, 1, 1)
                 else f"element {h0 + h},{w0 + w},{c0 + b // e} of a {H}x{W}x{C} tensor at {off}")
        raise HazardError(
            f"{who}", f"reads {what} at {self.name} offset {addr} ({where}), but {how}",
            "the memory plan overlaps these buffers too much; this is a planner bug, report the model")


def _whole_box(off, shape, esize):
    import numpy as np

    H, W, C = shape if len(shape) == 3 else (1, 1, int(np.prod(shape)))
    return off, (H, W, C), esize, (0, H, 0, W, 0, C)


def _in_box(off, shape, esize, t):
    return off, tuple(shape), esize, (t["ih0"], t["ih"], t["iw0"], t["iw"], t["ic0"], t["ic"])


def _out_box(off, shape, esize, t):
    return off, tuple(shape), esize, (t["oh0"], t["oh"], t["ow0"], t["ow"], t["oc0"], t["oc"])


def _compact(off, nbytes):
    return off, (1, 1, nbytes), 1, (0, 1, 0, 1, 0, nbytes)


class _Places:
    """Where each tensor is: (level, offset) in the activation level or, when
    moved out, in the spill level (reached through bounce buffers)."""

    def __init__(self, the_plan):
        acts = the_plan["activations"]
        self.offsets = acts["offsets"]
        spill = acts.get("spill")
        self.spill = spill["offsets"] if spill else {}
        stream = the_plan["weights"].get("stream")
        self.stream = stream if stream and stream["level"] == acts["level"] else None
        ends = [c["at"] + c["bytes"] for c in (self.stream or {}).get("chunks", ())]
        self.act = Level(acts["level"], max([acts.get("arena", 0), acts["peak"]]
                                            + [o + 1 for o in self.offsets.values()] + ends))
        self.far = Level(spill["level"], spill["bytes"]) if spill else None

    def of(self, name):
        if name in self.offsets and name not in self.spill:
            return self.act, self.offsets[name]
        return self.far, self.spill[name]


def _tag(name):
    return f"tensor {name!r}"


class _Stream:
    """The weight chunks in the activation level, in the order the layers
    ask for them (see the module docstring)."""

    def __init__(self, level, stream):
        self.level, self.chunks, self.k = level, (stream or {}).get("chunks", []), 0
        self.layers = (stream or {}).get("layers", {})

    def _box(self, k):
        return _compact(self.chunks[k]["at"], self.chunks[k]["bytes"])

    def _what(self, k):
        return f"weight chunk {k} ({self.chunks[k]['layer']} channels {self.chunks[k]['c0']}+)"

    def _held(self, k, who):
        self.level.read(self._box(k), self._what(k), who)

    def next(self, layer_name, who):
        k = self.k
        if k >= len(self.chunks) or self.chunks[k]["layer"] != layer_name:
            raise RuntimeError(f"hazard replay: {who} asks for a weight chunk out of the plan's order")
        self.k += 1
        if k == 0:
            self.level.write(self._box(0), self._what(0), "the weight stream (chunk 0)")
        self._held(k, who)
        if k + 1 < len(self.chunks):
            self.level.write(self._box(k + 1), self._what(k + 1), f"the weight stream, asked by {who}")

    def again(self, who):
        """A tile loading more of the chunk asked for last."""
        self._held(self.k - 1, who)

    def asks(self, layer_name):
        """How many chunks a layer asks for (0 when its weights do not stream)."""
        return self.layers.get(layer_name, {}).get("count", 0)

    def finish(self):
        if self.k != len(self.chunks):
            raise RuntimeError(f"hazard replay: {self.k} of {len(self.chunks)} weight chunks asked for")


def check(graph, tilings, the_plan, fused=None):
    """Replay the whole network over the plan; raise HazardError at the first
    byte read after it was overwritten. Returns the number of tiles replayed.
    fused: group -> {"layers": [dw, pw], "bands": [...]} (the schedule's
    fused steps: the first layer runs the step band by band, the second is
    empty)."""
    places = _Places(the_plan)
    lead = {g["layers"][0]: g for g in (fused or {}).values()}
    empty = {n for g in (fused or {}).values() for n in g["layers"][1:]}
    direct = the_plan.get("direct", {})
    size = ir.DTYPES
    # the application writes the inputs before the network runs
    for name in graph.inputs:
        t = graph.tensor(name)
        lvl, off = places.of(name)
        lvl.write(_whole_box(off, t.shape, size[t.dtype]), _tag(name), "the application (input)")
    feed = _Stream(places.act, places.stream)
    n = 0
    for layer in graph.layers:
        if layer.name in lead and lead[layer.name].get("kind") == "add":
            n += _replay_layer(layer, graph, tilings[layer.name], the_plan, places, feed,
                               epilogue=graph.layer(lead[layer.name]["layers"][1]))
        elif layer.name in lead and "windows" in lead[layer.name]:
            n += _replay_patched(graph, lead[layer.name], places, feed)
        elif layer.name in lead:
            n += _replay_fused(layer, graph.layer(lead[layer.name]["layers"][1]), graph, lead[layer.name]["bands"],
                               places, feed, [graph.layer(x) for x in lead[layer.name]["layers"][2:]])
        elif layer.name in direct:
            n += _replay_direct(layer, graph, direct[layer.name], places)
        elif layer.name not in empty:
            n += _replay_layer(layer, graph, tilings[layer.name], the_plan, places, feed)
    feed.finish()
    # ... and reads the outputs after it
    for name in graph.outputs:
        t = graph.tensor(name)
        lvl, off = places.of(name)
        lvl.read(_whole_box(off, t.shape, size[t.dtype]), _tag(name), "the application (output)")
    return n


def _replay_layer(layer, graph, tiling, the_plan, places, feed, epilogue=None):
    """One tiled layer's tiles. epilogue: the add run on its output tiles
    (fusion's add epilogue: each tile also reads the add's other input at
    the output tile's box, and writes the add's output there)."""
    y = graph.tensor(layer.output)
    skip = None
    if epilogue is not None:
        skip = [n for n in epilogue.inputs if n != layer.output][0]
        y = graph.tensor(epilogue.output)
    ye = ir.DTYPES[y.dtype]
    if is_whole(layer, graph):
        who = f"layer {layer.name}"
        for _ in range(feed.asks(layer.name)):
            feed.next(layer.name, who)
        for name in layer.inputs:
            x = graph.tensor(name)
            lvl, off = places.of(name)
            lvl.read(_whole_box(off, x.shape, ir.DTYPES[x.dtype]), _tag(name), who)
        lvl, off = places.of(layer.output)
        lvl.write(_whole_box(off, y.shape, ye), _tag(layer.output), who)
        return 1
    view = tiler_layer(layer, graph)
    tiles = list(tile_list(view, tiling))
    l1 = the_plan["tiles"]["layers"][layer.name]
    tile_level = _tile_level(the_plan, layer.name)
    bounces = the_plan["activations"].get("spill", {}).get("bounces", {})
    # a two-slot bounce buffer: tile i passes through slot i % 2
    slots = the_plan["activations"].get("spill", {}).get("slots", {})
    slot = lambda name, i: slots.get(name, 0) * (i % 2)  # noqa: E731
    # as codegen/layer.py: one L1 input buffer per input it loads tile by
    # tile (a matmul's right operand comes with the weights, below)
    reads = list(enumerate(layer.inputs[:len(l1["in"])]))
    chunk_c = feed.layers.get(layer.name, {}).get("chunk_c")
    for t in tiles:
        i = t["index"]
        who = f"layer {layer.name} tile {i}"
        # codegen/layer.py: loading tile i asks for the chunk its channels begin
        if chunk_c and _new_weights(tiles, i):
            if t["oc0"] % chunk_c == 0:
                feed.next(layer.name, who)
            else:
                feed.again(who)
        for k, name in reads:
            x = graph.tensor(name)
            xe = ir.DTYPES[x.dtype]
            lvl, off = places.of(name)
            box = _in_box(off, x.shape, xe, t)
            lvl.read(box, _tag(name), who)
            bounce = bounces.get(f"{layer.name}:bounce:in{k}")
            if lvl is places.far and bounce is not None:
                _through(places.act, the_plan["activations"]["offsets"][f"{layer.name}:bounce:in{k}"]
                         + slot(f"{layer.name}:bounce:in{k}", i),
                         t["ih"] * t["iw"] * t["ic"] * xe, f"{layer.name} input {k} tile {i}", who)
        if layer.op == "matmul" and _new_weights(tiles, i):
            b = graph.tensor(layer.inputs[1])
            lvl, off = places.of(layer.inputs[1])
            H, W, C = b.shape
            # columns oc0.. of every batch; with trans_b ([Bb, N, K]) rows oc0.. of every batch
            box = (0, H, t["oc0"], t["oc"], 0, C) if layer.trans_b else (0, H, 0, W, t["oc0"], t["oc"])
            lvl.read((off, tuple(b.shape), ir.DTYPES[b.dtype], box), _tag(layer.inputs[1]), who)
        if skip is not None:
            st = graph.tensor(skip)
            lvl, off = places.of(skip)
            lvl.read(_out_box(off, st.shape, ir.DTYPES[st.dtype], t), _tag(skip), who)
        out_name = epilogue.output if epilogue is not None else layer.output
        lvl, off = places.of(out_name)
        if lvl is places.far:
            name = f"{layer.name}:bounce:out"
            _through(places.act, the_plan["activations"]["offsets"][name] + slot(name, i),
                     t["oh"] * t["ow"] * t["oc"] * ye, f"{layer.name} output tile {i}", who)
        lvl.write(_out_box(off, y.shape, ye, t), _tag(out_name), who)
    _replay_tiles(layer, tiles, tiling, l1, tile_level)
    return len(tiles)


def _replay_fused(first, second, graph, bands, places, feed, epilogue=()):
    """A fused step (codegen/fused.py, DW->PW or PW->DW) in the activation
    level: both layers' weight chunks first, then band i reads its input
    rows (halo included, every column and channel), then writes its output
    rows, with the tiled layers' double-buffered timing. Its L1 regions are
    not replayed (codegen/fused.py checks its layout against the fused
    tiler's count; the intermediate never leaves L1)."""
    for layer in (first, second):
        for _ in range(feed.asks(layer.name)):
            feed.next(layer.name, f"fused step {first.name}+{second.name}")
    # a DW->PW step with its add epilogue: each band also reads the add's
    # other input's rows, and writes the add's output
    skip = [n for n in epilogue[0].inputs if n != second.output][0] if epilogue else None
    last = epilogue[-1] if epilogue else second
    x, y = graph.tensor(first.inputs[0]), graph.tensor(last.output)
    xl, xo = places.of(first.inputs[0])
    yl, yo = places.of(last.output)
    _, W, C = x.shape
    _, Wo, Co = y.shape
    for i, b in enumerate(bands):
        who = f"fused step {first.name}+{second.name} band {i}"
        xl.read((xo, tuple(x.shape), ir.DTYPES[x.dtype], (b["ih0"], b["ih"], 0, W, 0, C)), _tag(first.inputs[0]),
                who)
        if skip is not None:
            sl, so = places.of(skip)
            sl.read((so, tuple(y.shape), ir.DTYPES[graph.tensor(skip).dtype], (b["oh0"], b["oh"], 0, Wo, 0, Co)),
                    _tag(skip), who)
        yl.write((yo, tuple(y.shape), ir.DTYPES[y.dtype], (b["oh0"], b["oh"], 0, Wo, 0, Co)), _tag(last.output),
                 who)
    return len(bands)


def _replay_patched(graph, group, places, feed):
    """A patched step (codegen/patched.py) in the activation level: every
    layer's weight chunks first, then patch by patch the chain input's
    boxes it loads (halo rows and columns included; with cached halos only
    the rows below those kept), then its output patch, with the tiled
    layers' timing (a store may land before the next patch's loads). Its
    tile level is replayed too (tiles.patches.verify): every byte a call,
    an add or a store reads holds the tensor row and column it should."""
    layers = [graph.layer(n) for n in group["layers"]]
    name = f"patched step {layers[0].name}..{layers[-1].name}"
    for layer in layers:
        for _ in range(feed.asks(layer.name)):
            feed.next(layer.name, name)
    x, y = layers[0].inputs[0], layers[-1].output
    xt, yt = graph.tensor(x), graph.tensor(y)
    xl, xo = places.of(x)
    yl, yo = places.of(y)
    if "program" in group:
        _verified(*group["program"])
    for i, (reads, writes) in enumerate(group["windows"]):
        who = f"{name} patch {i}"
        for box in reads:
            xl.read((xo, tuple(xt.shape), ir.DTYPES[xt.dtype], box), _tag(x), who)
        for box in writes:
            yl.write((yo, tuple(yt.shape), ir.DTYPES[yt.dtype], box), _tag(y), who)
    return len(group["windows"])


_replayed = set()


def _verified(chain, prog):
    """The patched step's tile level replayed byte by byte
    (tiles.patches.verify), once per chain, tile and policy in a process:
    the budget step plans the same steps at several rungs."""
    from ..tiles import patches
    from ..util import canon

    key = canon.digest([chain, prog["tile"], prog["policy"], prog["bytes"]])
    if key in _replayed:
        return
    try:
        patches.verify(chain, prog)
    except AssertionError as err:
        raise HazardError(f"patched step {chain['name']}", f"its tile level: {err}",
                          "this is a planner bug; report the model") from None
    _replayed.add(key)


def _replay_direct(layer, graph, kind, places):
    """A layer run in place (tessera.planning.inplace): the kernel's own steps, each
    reading its input boxes, then writing its output boxes. The input must
    be whole when the layer starts; then no byte of the output may land on
    an input byte a later step reads. Vectorized: per input byte the last
    step reading it, per output byte the step writing it."""
    import numpy as np

    from . import inplace as direct_mod

    x, y = graph.tensor(layer.inputs[0]), graph.tensor(layer.output)
    xe, ye = ir.DTYPES[x.dtype], ir.DTYPES[y.dtype]
    xl, xo = places.of(layer.inputs[0])
    yl, yo = places.of(layer.output)
    who = f"layer {layer.name} (in place)"
    if kind == "apart":
        # no order modelled: the output may share no byte with any input
        for name in layer.inputs:
            t = graph.tensor(name)
            lvl, off = places.of(name)
            lvl.read(_whole_box(off, t.shape, ir.DTYPES[t.dtype]), _tag(name), who)
            if lvl is yl and off < yo + y.nbytes and yo < off + t.nbytes:
                raise HazardError(who, f"its output {layer.output!r} at {yl.name} offset {yo} overlaps its input "
                                  f"{name!r} at {off} from offset {max(off, yo)} on, and its kernel's order is "
                                  "not modelled (tessera.planning.inplace: apart)",
                                  "the memory plan overlaps these buffers too much; this is a planner bug, "
                                  "report the model")
        yl.write(_whole_box(yo, y.shape, ye), _tag(layer.output), who)
        return 1
    xl.read(_whole_box(xo, x.shape, xe), _tag(layer.inputs[0]), who)
    steps = direct_mod.events(layer, graph, kind)
    if xl is yl:
        last_read = np.full(x.nbytes, -1, dtype=np.int64)
        written = np.full(y.nbytes, len(steps), dtype=np.int64)
        xv = last_read.reshape(x.shape[0], x.shape[1], x.shape[2] * xe)
        yv = written.reshape(y.shape[0], y.shape[1], y.shape[2] * ye)
        for j, (reads, writes) in enumerate(steps):
            for h0, h, w0, w, c0, c in reads:
                xv[h0:h0 + h, w0:w0 + w, c0 * xe:(c0 + c) * xe] = j
            for h0, h, w0, w, c0, c in writes:
                yv[h0:h0 + h, w0:w0 + w, c0 * ye:(c0 + c) * ye] = j
        lo, hi = max(xo, yo), min(xo + x.nbytes, yo + y.nbytes)
        if lo < hi:
            bad = written[lo - yo:hi - yo] < last_read[lo - xo:hi - xo]
            if bad.any():
                addr = lo + int(bad.nonzero()[0][0])
                i, o = addr - xo, addr - yo
                _, W, C = x.shape
                _, Wo, Co = y.shape
                e_in = (i // xe // C // W, i // xe // C % W, i // xe % C)
                e_out = (o // ye // Co // Wo, o // ye // Co % Wo, o // ye % Co)
                raise HazardError(
                    f"layer {layer.name} step {int(last_read[i])} (in place)",
                    f"reads tensor {layer.inputs[0]!r} at {xl.name} offset {addr} (element "
                    f"{','.join(map(str, e_in))} of a {x.shape[0]}x{W}x{C} tensor at {xo}), but it holds tensor "
                    f"{layer.output!r} (element {','.join(map(str, e_out))}), written by step {int(written[o])} "
                    f"of the same layer",
                    "the memory plan overlaps these buffers too much; this is a planner bug, report the model")
    yl.write(_whole_box(yo, y.shape, ye), _tag(layer.output), who)
    return len(steps)


def _through(level, off, nbytes, what, who):
    """A bounce buffer: written, then read back at once."""
    box = _compact(off, nbytes)
    level.write(box, what, who)
    level.read(box, what, who)


def _new_weights(tiles, i):
    return i == 0 or (tiles[i]["oc0"], tiles[i]["oc"]) != (tiles[i - 1]["oc0"], tiles[i - 1]["oc"])


def _tile_level(the_plan, layer_name):
    return Level(the_plan["tiles"]["level"], the_plan["tiles"]["layers"][layer_name]["total"])


def _replay_tiles(layer, tiles, tiling, l1, level):
    """The tile level's double buffers (each layer on its own: the level
    starts empty for every layer). A tile's input and weights are tagged with
    the tile, its output with the tile; compute checks what it reads and the
    write-back reads its buffer until the wait two tiles later."""
    bufs = tiling["buffering"]
    by = tiling["l1_bytes"]
    n_in = len(l1["in"])

    def region(key, b, nbytes):
        return _compact(l1[key][b], nbytes)

    weighted = bool(by.get("weights") or by.get("params"))
    wb_of, wb = [], 0
    for i in range(len(tiles)):
        if i and _new_weights(tiles, i) and bufs > 1:
            wb ^= 1
        wb_of.append(wb)

    def load(i):
        who = f"layer {layer.name} tile {i} (load)"
        for k in range(n_in):
            level.write(_compact(l1["in"][k][i % bufs], by["in"]), f"input {k} of tile {i}", who)
        if weighted and _new_weights(tiles, i):
            for key in ("weights", "params"):
                if by.get(key):
                    level.write(region(key, wb_of[i], by[key]), f"{key} of tile {i}", who)

    def weights_of(i):
        j = i
        while not _new_weights(tiles, j):
            j -= 1
        return j

    pending = {}   # buffer -> tile whose write-back may still read it
    load(0)
    for i in range(len(tiles)):
        b = i % bufs
        who = f"layer {layer.name} tile {i}"
        if i + 1 < len(tiles):
            load(i + 1)
        if b in pending:    # wait out[b]: the write-back two tiles back is done
            j = pending.pop(b)
            level.read(region("out", b, by["out"]), f"output of tile {j}", f"layer {layer.name} tile {j} (write-back)")
        for k in range(n_in):
            level.read(_compact(l1["in"][k][b], by["in"]), f"input {k} of tile {i}", who)
        if weighted:
            w = weights_of(i)
            for key in ("weights", "params"):
                if by.get(key):
                    level.read(region(key, wb_of[i], by[key]), f"{key} of tile {w}", who)
        level.write(region("out", b, by["out"]), f"output of tile {i}", who)
        pending[b] = i
    for b, j in sorted(pending.items()):
        level.read(region("out", b, by["out"]), f"output of tile {j}", f"layer {layer.name} tile {j} (write-back)")
