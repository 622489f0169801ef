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


def moved_out(view):
    H, W, C = view["out"]
    return H * W * C * view["out_bytes"]


def fused_transfer(pair, ftiling):
    """Bytes of a fused step: the first layer's input row bands in, the
    second's output row bands out; the intermediate never moves. DW->PW:
    the depthwise's input rows (halo included) in, the pointwise's rows
    out; PW->DW: the pointwise's input for the depthwise's input rows in,
    the depthwise's rows out."""
    if pair.get("kind") == "add":
        # an add epilogue: the producer's tiles, each output tile's box of the
        # add's other input in (the same box as the output tile written)
        view = {k: v for k, v in pair["layer"].items() if k != "epilogue"}
        ta = ftiling["tiling"]
        moved = layer_transfer(view, ta)
        if ta.get("whole"):
            return moved + moved_out(view)
        return moved + sum(t["oh"] * t["ow"] * t["oc"] * view["out_bytes"] for t in tiler.tiles(view, ta))
    dw, pw = pair["dw"], pair["pw"]
    if pair.get("kind", "dw_pw") in ("dw_pw", "dw_pw_add"):
        (_, W, C), (_, Wo, Co) = dw["in"], pw["out"]
        in_bytes, out_bytes = dw["in_bytes"], pw["out_bytes"]
    else:
        (_, W, C), (_, Wo, Co) = pw["in"], dw["out"]
        in_bytes, out_bytes = pw["in_bytes"], dw["out_bytes"]
    # with an add epilogue, each output band's rows of the add's other input come in too
    outs = 2 if pair.get("kind") in ("dw_pw_add", "pw_dw_add") else 1
    moved = 0
    for band in ftiling["bands"]:
        moved += band["ih"] * W * C * in_bytes + outs * band["oh"] * Wo * Co * out_bytes
    return moved
