"""Layers run in place ("direct"): the kernel reads its input from and
writes its output to the activation buffers, with no copy into a tile
arena (only its scratch, im2col columns and the like, sits in the tile
level). Worth it where the tile level is ordinary RAM beside the
activations (flat SRAM: stm32f4), or where a RAM cap cannot be met with a
tile arena (stm32h7's DTCM is faster than its SRAM, so there direct layers
are taken only as a cap needs them; rambudget.py).

A direct layer's output may overlap its input by the distance the kernel's
own loop order allows. `events` walks that order exactly as the C does
(kernels/cmsis_nn/arm/convolve.c, depthwise.c): a sequence of steps, each
reading some input boxes and then writing some output boxes, every read of
a step before its writes. The smallest safe distance is the tiles' formula
(tiles/geometry.py: steps_gap) over these steps, and hazard.py replays them byte by byte.

Layers whose kernel order is not modelled run direct "apart": their output
never shares a byte with their inputs (CMSIS-NN's elementwise add,
pooling, linear), which needs no order.

The CMSIS-NN kernels whose order is modelled here run "conv", "pointwise"
or "depthwise": int8 convolutions (arm_convolve_s8: im2col of four pixels
at a time, or two when the patch is large), pointwise
(arm_convolve_1x1_s8_fast: four pixels) and depthwise (channel groups of
four outermost, then the last channels one by one; a 3x3 window hanging
over the border is moved inside). A depthwise layer where the memory peak needs its output to
follow its input closely ("depthwise_rows": overlap.row_band_layers, the
layers the tiler cuts in row bands) is called once per output row
(bands()), so that its channel-group order does not keep the whole output
ahead of its input; elsewhere once (fewer calls, each setting up its
filters). Any layer whose call could fall back to another kernel (other
arithmetic, dilation, a strided pointwise) stays tiled.
"""

from ..config.views import channel_operand, is_whole, param_arrays
from ..tiles.geometry import bands, tensors_gap

# the kernel functions whose loop order `events` reproduces (TFLite's run
# the same cores in the same order: kernels/cmsis_nn/glue.c)
KINDS = {"tsr_cmsis_conv2d": "conv", "tsr_cmsis_pointwise": "pointwise", "tsr_cmsis_depthwise": "depthwise",
         "tsr_cmsis_conv2d_tfl": "conv", "tsr_cmsis_pointwise_tfl": "pointwise",
         "tsr_cmsis_depthwise_tfl": "depthwise"}

# conv2d's quads (four im2col columns) where the library's tiler gives
# them room too (kernels/cmsis_nn/library.yaml: cols4 when patch <= 1024)
QUAD_PATCH = 1024


def _align4(n):
    return (n + 3) // 4 * 4


def _cols_bytes(k, P):
    return P * _align4(k) * 2


# ops run "apart": their kernels' whole call needs no scratch beyond
# CMSIS-NN's per-channel multipliers (codegen/layer.py sets their arguments)
APART = {"add": "tsr_cmsis_add", "maxpool": "tsr_cmsis_maxpool", "avgpool": "tsr_cmsis_avgpool",
         "linear": "tsr_cmsis_linear"}
APART_OPS = tuple(APART)


def candidates(graph, kernels):
    """The layers that may run direct on this kernel library, as far as
    their ops and tensors say: which ones do depends on the C function the
    library calls for each (`kind`). Only CMSIS-NN's orders are modelled."""
    if kernels != "cmsis_nn":
        return []
    out = []
    for layer in graph.layers:
        if (is_whole(layer, graph) or channel_operand(layer, graph)
                or layer.op not in ("conv2d", "pointwise", "depthwise") + APART_OPS):
            continue
        tensors = [graph.tensor(n) for n in layer.inputs + [layer.output]]
        if all(len(t.shape) == 3 and t.dtype == "int8" for t in tensors):
            out.append(layer.name)
    return out


def kind(layer, graph, kernel):
    """"conv", "pointwise", "depthwise", "apart", or None when the layer
    cannot run direct: one of `candidates`, `kernel` the C function its
    kernel library calls for it (codegen.libraries.cmsis_nn.kernel_function,
    handed in as data: the code generator decides it, after the plan)."""
    tensors = [graph.tensor(n) for n in layer.inputs + [layer.output]]
    if layer.op in APART_OPS:
        ok = kernel == APART[layer.op] and len(layer.inputs) == (2 if layer.op == "add" else 1)
        return "apart" if ok else None
    if len(layer.inputs) != 1 or (layer.dilation and list(layer.dilation) != [1, 1]):
        return None
    k = KINDS.get(kernel)
    x, y = tensors[0], tensors[-1]
    if k is None:
        return None     # tessera's DSP kernels (any_rq.c) or the reference ones: their scratch and order not here
    if k == "pointwise" and (list(layer.stride) != [1, 1] or any(layer.pad)):
        return None     # arm_convolve_1x1_s8_fast refuses it: the reference kernel would run
    if k == "depthwise" and x.shape[2] != y.shape[2]:
        return None
    return k


def scratch_bytes(layer, graph, k):
    """The scratch the glue and kernel are given: CMSIS-NN's multipliers
    and shifts (8 bytes a channel, glue.c's quant), then the kernel's
    buffer, sized so that the path `events` models is the one taken."""
    x, y = graph.tensor(layer.inputs[0]), graph.tensor(layer.output)
    ci, co = x.shape[2], y.shape[2]
    kh, kw = layer.kernel
    if k == "apart":
        if layer.op != "linear":
            return 0
        # CMSIS-NN's arrays when per channel, then the input as an int16 column (mm.c)
        per_channel = any(name == "mul" for name, _, _ in param_arrays(layer))
        return (8 * co if per_channel else 0) + _cols_bytes(x.shape[0] * x.shape[1] * ci, 1)
    k = "depthwise" if k == "depthwise_rows" else k
    if k == "conv":
        patch = kh * kw * ci
        # a small patch's filter rows padded to whole words after the columns (mm.c)
        wpad = co * _align4(patch) if patch <= 48 and patch % 4 else 0
        return 8 * co + _cols_bytes(patch, 4 if patch <= QUAD_PATCH else 2) + wpad
    if k == "pointwise":
        return 8 * co + _cols_bytes(ci, 4)
    # depthwise: the filter reordered to [kh][kw][c], then sign-extended (int16)
    taps = kh * kw
    return 8 * co + _align4(taps * co) + 2 * taps * co


def _quads(layer, graph, k):
    if k == "pointwise":
        return True
    kh, kw = layer.kernel
    return kh * kw * graph.tensor(layer.inputs[0]).shape[2] <= QUAD_PATCH


def events(layer, graph, k):
    """The kernel's steps in order: [(reads, writes)], each a list of boxes
    (h0, h, w0, w, c0, c) in the input and the output tensor."""
    H, W, C = graph.tensor(layer.inputs[0]).shape
    Ho, Wo, Co = graph.tensor(layer.output).shape
    kh, kw = layer.kernel
    sh, sw = layer.stride
    pt, pl = layer.pad[0], layer.pad[1]
    out = []
    if k in ("conv", "pointwise"):
        def window(p):
            oy, ox = divmod(p, Wo)
            iy, ix = oy * sh - pt, ox * sw - pl
            y0, y1, x0, x1 = max(0, iy), min(H, iy + kh), max(0, ix), min(W, ix + kw)
            return (y0, y1 - y0, x0, x1 - x0, 0, C)

        def pixels(p, n):       # n consecutive output pixels from p, row-major
            boxes = []
            while n > 0:
                oy, ox = divmod(p, Wo)
                m = min(n, Wo - ox)
                boxes.append((oy, 1, ox, m, 0, Co))
                p, n = p + m, n - m
            return boxes

        step = 4 if _quads(layer, graph, k) else 2
        total, p = Ho * Wo, 0
        while p < total:
            n = min(step, total - p)
            out.append(([window(p + i) for i in range(n)], pixels(p, n)))
            p += n
        return out
    # depthwise: one kernel call per band of output rows (bands())
    out = []
    for b in bands(layer, graph, k):
        for reads, writes in _dw_call(b["ih"], W, C, b["oh"], Wo, kh, kw, sh, sw, b["pad_t"], pl):
            out.append(([(h0 + b["ih0"], h, w0, w, c0, c) for h0, h, w0, w, c0, c in reads],
                        [(h0 + b["oh0"], h, w0, w, c0, c) for h0, h, w0, w, c0, c in writes]))
    return out


def _dw_call(H, W, C, Ho, Wo, kh, kw, sh, sw, pt, pl):
    """The steps of one depthwise call (dw_ch1 with the sign-extended
    filter: dw_group_pixels per group of four channels, then dw_channel),
    in the call's own coordinates."""
    out = []
    over_b = (Ho - 1) * sh - pt + 3 - H
    over_r = (Wo - 1) * sw - pl + 3 - W
    shifted = (C >= 4 and kh == 3 and kw == 3 and H >= 3 and W >= 3 and pt <= 1 and pl <= 1
               and over_b <= 1 and over_r <= 1)
    ox_lo = min((pl + sw - 1) // sw, Wo)
    ox_hi = (W + pl - 3) // sw + 1
    ox_hi = Wo if ox_hi > Wo else max(ox_hi, ox_lo)

    def clipped(oy, ox, c0, c):
        iy, ix = oy * sh - pt, ox * sw - pl
        y0, y1, x0, x1 = max(0, iy), min(H, iy + kh), max(0, ix), min(W, ix + kw)
        return (y0, y1 - y0, x0, x1 - x0, c0, c)

    def moved(oy, ox, c0):
        # the window moved inside, as the pointer arithmetic of dw_group_pixels
        iy = oy * sh - pt
        a = 0 if iy < 0 else 2 if iy + 3 > H else 1
        row = iy + (1 if a == 0 else -1 if a == 2 else 0)
        col = ox * sw - pl + (1 if ox < ox_lo else -1 if ox >= ox_hi else 0)
        return (row, 3, col, 3, c0, 4)

    for g in range(C >> 2):
        for oy in range(Ho):
            for ox in range(Wo):
                box = moved(oy, ox, 4 * g) if shifted else clipped(oy, ox, 4 * g, 4)
                out.append(([box], [(oy, 1, ox, 1, 4 * g, 4)]))
    for ch in range(C & ~3, C):
        for oy in range(Ho):
            for ox in range(Wo):
                out.append(([clipped(oy, ox, ch, 1)], [(oy, 1, ox, 1, ch, 1)]))
    return out


def gap(layer, graph, k):
    """The smallest distance (bytes) the output may start below the input:
    no step reads a byte an earlier step wrote (overlap.safe_gap's rule,
    over the kernel's steps)."""
    x, y = graph.tensor(layer.inputs[0]), graph.tensor(layer.output)
    if k == "apart":
        return y.nbytes     # no overlap
    return tensors_gap(events(layer, graph, k), x, y)


def eligible(graph, kernels, rows=()):
    """{layer name: kind} of the layers that may run direct; kernels:
    {layer name: the C function its kernel library calls} for the
    `candidates`; rows: the layers cut in row bands where the memory peak
    is (their depthwise calls go row by row)."""
    out = {}
    for layer in graph.layers:
        k = kind(layer, graph, kernels[layer.name]) if layer.name in kernels else None
        if k is not None:
            out[layer.name] = "depthwise_rows" if k == "depthwise" and layer.name in rows else k
    return out


def l1_layout(layer, graph, k, align=4):
    """A direct layer's tile-level regions: its scratch only."""
    n = (scratch_bytes(layer, graph, k) + align - 1) // align * align
    return {"in": [[0]], "out": [0], "weights": [0], "params": [0], "scratch": 0, "total": n, "direct": k,
            "scratch_bytes": scratch_bytes(layer, graph, k)}
