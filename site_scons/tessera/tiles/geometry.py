"""Tile geometry: output tiles, the input each one reads, and its padding.

Every question about shapes is answered here, once, by walking the actual
tiles: the CP-SAT model reads per-axis tables built from these walks, and
`tiles()` (which the codegen turns into the loop nest) is the same walk. The
model and the generated code therefore agree on every byte by construction.
The same boxes give the bytes an out-of-core tile moves (box_transfers),
the calls of a depthwise layer run in place (bands) and how far a layer's
output may start below its input when its steps run in order (steps_gap).
"""

from .. import ir

# Ops whose output channel c reads only input channel c: the input tile has
# the output tile's channels. Standard convolutions read every input channel
# per output (DORY does not tile input channels), so their input tile has C.
CHANNEL_WISE = ("depthwise", "add", "maxpool", "avgpool", "mul", "lut")


def axis_tiles(out_size, tile, in_size, k, s, pad_lo, pad_hi):
    """Tiles of one spatial axis: [(o0, o, i0, i, pad_lo, pad_hi), ...].

    Output positions [o0, o0+o) read the padded-input window
    [o0*s - pad_lo, (o0+o-1)*s - pad_lo + k - 1]; the part inside the tensor
    is [i0, i0+i), the rest is this tile's padding on each side.
    """
    out = []
    for o0 in range(0, out_size, tile):
        o = min(tile, out_size - o0)
        v0 = o0 * s - pad_lo
        v1 = (o0 + o - 1) * s - pad_lo + k - 1
        i0, i1 = max(0, v0), min(in_size - 1, v1)
        out.append((o0, o, i0, i1 - i0 + 1, i0 - v0, v1 - i1))
    return out


def axis_legal(spans):
    """Padding only on border tiles: the kernels take padding arguments only
    for the first and last tile of an axis (DORY's rule). A tile size that
    puts padding on an inner tile (tiny tiles, large padding) is not offered.
    """
    last = len(spans) - 1
    return all((j == 0 or sp[4] == 0) and (j == last or sp[5] == 0)
               for j, sp in enumerate(spans))


def axis_table(out_size, in_size, k, s, pad_lo, pad_hi):
    """{tile: (n_tiles, border_tile, max_input_extent)} for every legal tile.

    The largest input extent is taken over the real tiles, so border
    clipping is exact (it is not monotone in the tile size in general).
    """
    table = {}
    for t in range(1, out_size + 1):
        spans = axis_tiles(out_size, t, in_size, k, s, pad_lo, pad_hi)
        if axis_legal(spans):
            table[t] = (len(spans), spans[-1][1], max(sp[3] for sp in spans))
    return table


def axes(layer):
    """Per-axis parameters (out, in, k, s, pad_lo, pad_hi) for h and w.

    Linear reads the whole input tensor for its single output pixel, which
    is a window of the full input size with no stride or padding.
    """
    H, W, _ = layer["in"]
    Ho, Wo, _ = layer["out"]
    if layer["op"] == "linear":
        return (Ho, H, H, 1, 0, 0), (Wo, W, W, 1, 0, 0)
    (kh, kw), (sh, sw) = layer["kernel"], layer["stride"]
    # a dilated window spans d * (k - 1) + 1 inputs: that is the halo
    dh, dw = layer.get("dilation", [1, 1])
    kh, kw = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    top, left, bottom, right = layer["pad"]
    return (Ho, H, kh, sh, top, bottom), (Wo, W, kw, sw, left, right)


def channel_span(layer, oc0, oc):
    """Input channels read by output channels [oc0, oc0+oc)."""
    if layer["op"] in CHANNEL_WISE:
        return oc0, oc
    return 0, layer["in"][2]


def grid(layer, tiling):
    """The tiles as a grid: (chans [(oc0, oc, ic0, ic)], rows, cols), rows
    and cols as axis_tiles gives them. Tile i is channel tile
    i // (len(rows) * len(cols)), then row band, then column band; with
    `order: hcw` in the tiling (rows_first) row band first, then channel
    tile, then column band. The generated code keeps these three tables
    and rebuilds each tile from them (tsr_tile_at in tessera/tile.h)."""
    t = tiling["tile"]
    ax_h, ax_w = axes(layer)
    rows = axis_tiles(ax_h[0], t["h"], *ax_h[1:])
    cols = axis_tiles(ax_w[0], t["w"], *ax_w[1:])
    Co = layer["out"][2]
    chans = []
    for oc0 in range(0, Co, t["c"]):
        oc = min(t["c"], Co - oc0)
        chans.append((oc0, oc, *channel_span(layer, oc0, oc)))
    return chans, rows, cols


def rows_first(tiling):
    """Row bands outermost, every channel tile of a band before the next
    band (a storage-level tile: a band of the output gathered in SRAM and
    written to storage once, docs/out_of_core.md); else channel tiles
    outermost (weights load once per channel tile)."""
    return tiling.get("order") == "hcw"


def tiles(layer, tiling):
    """Yield every tile in execution order: channel tiles outermost (weights
    load once per channel tile), then rows, then columns; or rows first
    (rows_first)."""
    chans, rows, cols = grid(layer, tiling)
    if rows_first(tiling):
        order = ((c, r, w) for r in rows for c in chans for w in cols)
    else:
        order = ((c, r, w) for c in chans for r in rows for w in cols)
    for index, ((oc0, oc, ic0, ic), (oh0, oh, ih0, ih, ptop, pbottom), (ow0, ow, iw0, iw, pleft, pright)) \
            in enumerate(order):
        yield {"index": index,
               "oh0": oh0, "oh": oh, "ow0": ow0, "ow": ow, "oc0": oc0, "oc": oc,
               "ih0": ih0, "ih": ih, "iw0": iw0, "iw": iw, "ic0": ic0, "ic": ic,
               "pad": [ptop, pleft, pbottom, pright]}


def chunks(layer, tiling):
    """The reduction chunks of a tiling: [(k0, kc)], input channels
    [k0, k0 + kc) each. A split tiling (`split: {"k": kc}`, tessera.tiler:
    one output's reduction does not fit L1) cuts the input channels of
    conv2d, pointwise and linear layers into chunks of kc (the last one
    smaller); otherwise one chunk of every input channel."""
    C = layer["in"][2]
    kc = split_k(tiling) or C
    return [(k0, min(kc, C - k0)) for k0 in range(0, C, kc)]


def split_k(tiling):
    """The chunk of a split tiling's reduction (input channels), or 0."""
    return (tiling.get("split") or {}).get("k", 0)


def split_blocks(cout, tile_c, chunk_list, window, params):
    """Where a split layer's constants sit on a storage level: in the
    order its steps use them (channel tiles outermost, then the reduction
    chunks), so that the program streams them as one run of consecutive
    bytes. Per channel tile (oc0, oc): its rows of each parameter array
    (`params`: [(name, bytes per channel)], in order), then per chunk
    (k0, kc) its weights [oc][window][kc], the block the step kernel
    reads. Returns ([{"oc0", "oc", "at", "params": {name: offset},
    "chunks": [offset]}], total bytes); offsets from the layer's start."""
    out, at = [], 0
    for oc0 in range(0, cout, tile_c):
        oc = min(tile_c, cout - oc0)
        tile = {"oc0": oc0, "oc": oc, "at": at, "params": {}, "chunks": []}
        for name, size in params:
            tile["params"][name] = at
            at += oc * size
        for _, kc in chunk_list:
            tile["chunks"].append(at)
            at += oc * window * kc
        out.append(tile)
    return out, at


def w_per_k(layer):
    """Weight bytes per output channel and input channel of a conv-like
    layer: the window (kh * kw; linear: the input's h * w)."""
    if layer["op"] == "linear":
        return layer["in"][0] * layer["in"][1]
    return layer["kernel"][0] * layer["kernel"][1]


# output pixels per depthwise call, at least (whole rows): its kernel runs
# channel groups outermost, so within a call group 0 writes every row before
# group 1 reads the first; fewer rows a call keep the output closer behind
# the input, but every call reorders and sign-extends the whole filter (on
# narrow rows more than the row's arithmetic). 1: one row, the least RAM
# (dscnn_kws on stm32f4: 24,832 B at +31% instructions; 16, four 5-pixel
# rows: 28,672 B at +4%; docs/memory.md)
DW_CALL_PIXELS = 1


def bands(layer, graph, k):
    """A direct depthwise layer's calls: [{"oh0", "oh", "ih0", "ih",
    "pad_t", "pad_b"}], full width and every channel (contiguous runs of
    the HWC tensors), with the tiler's row geometry: bands of DW_BAND_ROWS
    rows for "depthwise_rows", else (or when such bands would put padding
    inside: large padding) one call."""
    H = graph.tensor(layer.inputs[0]).shape[0]
    Ho = graph.tensor(layer.output).shape[0]
    kh, sh, pt, pb = layer.kernel[0], layer.stride[0], layer.pad[0], layer.pad[2]
    Wo = graph.tensor(layer.output).shape[1]
    rows = min(Ho, -(-DW_CALL_PIXELS // Wo)) if k == "depthwise_rows" else Ho
    spans = axis_tiles(Ho, rows, H, kh, sh, pt, pb)
    if not axis_legal(spans) or any(sp[3] <= 0 for sp in spans):
        spans = axis_tiles(Ho, Ho, H, kh, sh, pt, pb)
    return [{"oh0": o0, "oh": o, "ih0": i0, "ih": i, "pad_t": lo, "pad_b": hi} for o0, o, i0, i, lo, hi in spans]


def box_transfers(base, shape, esize, h0, h, w0, w, c0, c):
    """The transfers [(offset, bytes)] of a box of an HWC tensor at `base`."""
    H, W, C = shape
    at = lambda y, x, ch: base + ((y * W + x) * C + ch) * esize  # noqa: E731
    if c == C and w == W:
        return [(at(h0, 0, 0), h * W * C * esize)]
    if c == C:
        return [(at(y, w0, 0), w * C * esize) for y in range(h0, h0 + h)]
    return [(at(y, x, c0), c * esize) for y in range(h0, h0 + h) for x in range(w0, w0 + w)]


def _first(box, shape, esize):
    h0, _, w0, _, c0, _ = box
    _, W, C = shape
    return ((h0 * W + w0) * C + c0) * esize


def _last(box, shape, esize):
    h0, h, w0, w, c0, c = box
    _, W, C = shape
    return (((h0 + h - 1) * W + w0 + w - 1) * C + c0 + c - 1) * esize + esize - 1


def steps_gap(steps, x_shape, xe, y_shape, ye):
    """The smallest distance (bytes) the output may start below the input
    when `steps` run in order, each (boxes read in the input, boxes written
    in the output), a box (h0, h, w0, w, c0, c) of an HWC tensor of that
    shape and element size: no step reads a byte an earlier step wrote."""
    written, gap = -1, 0
    for reads, writes in steps:
        if written >= 0 and reads:     # (a patch may read nothing: its input rows are kept)
            gap = max(gap, written - min(_first(b, x_shape, xe) for b in reads) + 1)
        written = max([written] + [_last(b, y_shape, ye) for b in writes])
    return gap


def tensors_gap(steps, x, y):
    """steps_gap between two IR tensors."""
    return steps_gap(steps, x.shape, ir.DTYPES[x.dtype], y.shape, ir.DTYPES[y.dtype])
