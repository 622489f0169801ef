"""l1_layout: where each region of one tiled layer sits in L1.

The tiler has already sized every region so the whole set fits the budget;
this only lays them out: packed from 0 in a fixed order (inputs, output,
weights, params, scratch, a split reduction's
accumulators), each buffer of a double-buffered region right
after the other, every offset aligned. No search: within one layer all
regions are live for the whole layer, so packing is optimal.
"""

from ...errors import FitError
from .lifetimes import align_up

# Regions that are double buffered (DMA fills one copy while the cores use
# the other) in the order they are laid out. Scratch (e.g. im2col) is only
# touched by the compute, so it always has one copy.
BUFFERED = ("out", "weights", "params")


def _bytes(l1, key, where):
    v = l1.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{where}: l1_bytes['{key}'] must be a non-negative "
                         f"integer, got {v!r}")
    return v


def l1_layout(tiling, align=4, layer=None):
    """Offsets of every L1 region of a layer's tiling.

    tiling: the tiler's result ("buffering", "l1_bytes", "l1_budget", and
    "n_inputs" for layers with several inputs, where l1_bytes["in"] is the
    size of one input tile). layer: a name for error messages (defaults to
    tiling["layer"] or tiling["name"] when present).

    Returns {"in": [[off per buffer] per input], "out": [...], "weights":
    [...], "params": [...], "scratch": off, "total": bytes, "budget": bytes}.
    """
    name = layer or tiling.get("layer") or tiling.get("name")
    where = f"L1 ({name})" if name else "L1"
    buffering = tiling.get("buffering", 1)
    if buffering not in (1, 2):
        raise ValueError(f"{where}: buffering must be 1 or 2, got {buffering!r}")
    l1 = tiling["l1_bytes"]
    n_inputs = tiling.get("n_inputs", l1.get("n_inputs", 1))
    if isinstance(n_inputs, bool) or not isinstance(n_inputs, int) or n_inputs < 1:
        raise ValueError(f"{where}: n_inputs must be a positive integer, got {n_inputs!r}")
    budget = tiling["l1_budget"]

    cur = 0

    def take(nbytes):
        nonlocal cur
        off = cur
        cur += align_up(nbytes, align)  # 0 bytes: an offset, no space
        return off

    in_bytes = _bytes(l1, "in", where)
    layout = {"in": [[take(in_bytes) for _ in range(buffering)]
                     for _ in range(n_inputs)]}
    for key in BUFFERED:
        nbytes = _bytes(l1, key, where)
        # a layer whose weights load once has one weight and parameter buffer
        n = tiling.get("weight_buffers", buffering) if key in ("weights", "params") else buffering
        layout[key] = [take(nbytes) for _ in range(n)]
    if "skip" in l1:
        # an add epilogue's other input (fusion): double-buffered like the output
        layout["skip"] = [take(_bytes(l1, "skip", where)) for _ in range(buffering)]
    layout["scratch"] = take(_bytes(l1, "scratch", where))
    if "acc" in l1:
        # a split reduction's 32-bit partial sums (tessera.tiler): one buffer,
        # live from a tile's first chunk to its last
        layout["acc"] = take(_bytes(l1, "acc", where))
    layout["total"] = cur
    layout["budget"] = budget

    if cur > budget:
        tiler_total = l1.get("total")
        note = ""
        if isinstance(tiler_total, int) and tiler_total <= budget:
            note = (f" (the tiler counted {tiler_total} bytes; the rest is "
                    f"{align}-byte alignment padding)")
        raise FitError(
            where=where,
            what=(f"the tile buffers need {cur} bytes but L1 has {budget} "
                  f"bytes available{note}"),
            fix="this is a tiler bug; the tiler must count aligned sizes "
                "(a larger L1 in the target YAML works around it)")
    return layout
