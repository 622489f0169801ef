"""Activation bytes moved between L2 and L1 (weights apart), counted on the
tiles the generated code moves: every input box in, every output box out."""

from .. import tiler


def layer_transfer(view, tiling):
    """Bytes of one layer's tiles: inputs (each input's box) and output."""
    if tiling.get("whole"):
        H, W, C = view["out"]
        return sum(view["in_sizes"]) * view["in_bytes"] + H * W * C * view["out_bytes"]
    moved = 0
    for t in tiler.tiles(view, tiling):
        moved += view["n_inputs"] * t["ih"] * t["iw"] * t["ic"] * view["in_bytes"]
        moved += t["oh"] * t["ow"] * t["oc"] * view["out_bytes"]
    return moved


def fused_transfer(pair, ftiling):
    """Bytes of a fused DW->PW step: the depthwise's input row bands in, the
    pointwise's output row bands out; the intermediate never moves."""
    dw, pw = pair["dw"], pair["pw"]
    _, W, C = dw["in"]
    _, Wo, Co = pw["out"]
    moved = 0
    for band in ftiling["bands"]:
        moved += band["ih"] * W * C * dw["in_bytes"] + band["oh"] * Wo * Co * pw["out_bytes"]
    return moved
