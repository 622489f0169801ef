"""The price of a channel-major (CHW) pointwise -> depthwise tensor
(docs/gvsoc.md, "Depthwise, session 11"): what the depthwise saves reading
its input as planes, against the DMA commands the two layers' boxes of a
channel-major tensor take beyond an HWC tensor's. The figures are the
kernel library's (kernels/pulp_nn/library.yaml `chw:`), measured on GVSoC.
pipeline/plan.py weighs each pair with it; tiler/costed.py ranks a pair's
tiles with it."""


def _count(n, t):
    return -(-n // t)


def commands(box, shape, layout):
    """DMA commands (kernels/include/tessera/tile.h, the pulp_open HAL) one
    box {h, w, c} of a [H, W, C] tensor takes: HWC whole pixels one, a
    channel slice one per row; CHW whole rows one, else one per channel."""
    H, W, C = shape
    if layout == "chw":
        return 1 if box["w"] >= W else box["c"]
    return 1 if box["c"] >= C else box["h"]


def extra(box, shape, n_boxes, price):
    """Cycles n_boxes boxes of a channel-major tensor take beyond an HWC
    one's: none while a box is at most price["queue"] commands (core 0
    issues them while the DMA runs), else price["command"] for each command
    beyond the HWC box's. Measured on mbv1_128 (8 cores): pw3's 5x8x128 and
    pw4's 8x10x84 tiles (128, 84 commands a box) took 83 and 81 cycles a
    command more; pw5's 16x4x36 and pw7's 8x4x20 (36, 20) ran 1-2.5%
    faster. Never below 0: the fitted cost model already prices the HWC
    boxes' commands (whole planes against channel slices measured -1% to
    -4% on the pointwise, not credited)."""
    n = commands(box, shape, "chw")
    if n <= price["queue"]:
        return 0
    return n_boxes * max(0, n - commands(box, shape, "hwc")) * price["command"]


def gain(dw_out, stride, cores, price):
    """Cycles the depthwise saves with a channel-major input: core 0's
    cycles an output at its stride (price["gain_per_output"]), its share of
    the outputs (channels are split over the cores)."""
    per = price["gain_per_output"].get(stride, 0)
    Ho, Wo, Co = dw_out
    return int(round(Ho * Wo * _count(Co, cores) * per))


def copies_words(in_w):
    """The depthwise's plane copy is words only for rows of 4k bytes (the
    others barely beat the HWC gather: docs/gvsoc.md, session 10)."""
    return in_w % 4 == 0


def n_tiles(tile, shape):
    """How many tiles of at most `tile` {h, w, c} cover `shape`."""
    return _count(shape[0], tile["h"]) * _count(shape[1], tile["w"]) * _count(shape[2], tile["c"])


def pair_net(pw_tiling, dw_tiling, pw_out, dw_in, dw_out, pair_gain, price):
    """Cycles a pair saves channel-major with these tilings (> 0: it pays):
    the depthwise's gain where its rows copy in words, less the extra
    commands of the pointwise's output boxes and the depthwise's input
    boxes."""
    got = pair_gain if copies_words(dw_tiling["in_tile"]["w"]) else 0
    cost = extra(pw_tiling["tile"], pw_out, n_tiles(pw_tiling["tile"], pw_out), price)
    cost += extra(dw_tiling["in_tile"], dw_in, n_tiles(dw_tiling["tile"], dw_out), price)
    return got - cost
