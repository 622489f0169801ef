"""Byte counts and every named quantity, on plain numbers, for one tile.

This is the reference the CP-SAT model must agree with: the enumerator,
the untiled check, the FitError message and the reported `l1_bytes` all
come from here.

L1 holds, per buffer set, one tile buffer per input, one output tile, one
weight and one parameter tile; `buffering` sets of them; plus the kernel's
scratch once, and for a split tiling (the reduction in chunks of tile_k
input channels) the output tile's 32-bit partial sums once. Each buffer is counted rounded up to the library's alignment,
as the allocator places it.
"""

from ..tiles import geometry
from ..tiles.geometry import CHANNEL_WISE


def constants(layer, target, buffering):
    """Quantities fixed before the solve (library.CONSTANTS)."""
    H, W, C = layer["in"]
    Ho, Wo, Co = layer["out"]
    kh, kw = layer["kernel"]
    budget = target["l1_budget"]
    return {
        "cores": target["cores"], "buffering": buffering,
        "l1_budget": budget, "l1_permille": max(1, budget // 1000),
        "kh": kh, "kw": kw, "kernel_area": kh * kw, "patch": kh * kw * C,
        "in_h": H, "in_w": W, "in_c": C, "out_h": Ho, "out_w": Wo, "out_c": Co,
        "in_bytes": layer["in_bytes"], "out_bytes": layer["out_bytes"],
        "n_inputs": layer["n_inputs"],
        "tile_k": C, "n_chunks": 1, "border_k": C,
    }


def align_up(n, align):
    return -(-n // align) * align


def in_tile_c(layer, tc, tk=None):
    return tc if layer["op"] in CHANNEL_WISE else (tk or layer["in"][2])


# ops whose reduction (input channels times the window) the tiler may split
SPLIT_OPS = ("conv2d", "pointwise", "linear")
ACC_BYTES = 4       # a partial sum: int32


def quantities(layer, target, spec, th, tw, tc, buffering, tables=None, tk=None):
    """All named quantities for output tile (th, tw, tc), or None when a
    spatial tile size is not legal (padding on an inner tile). tk: the
    reduction chunk (input channels per step) of a split tiling; None or
    every input channel: not split.

    tables: the per-axis geometry tables, to skip rebuilding them per call.
    """
    if tables is None:
        tables = tuple(geometry.axis_table(*ax) for ax in geometry.axes(layer))
    (tab_h, tab_w), Co = tables, layer["out"][2]
    if th not in tab_h or tw not in tab_w:
        return None
    nh, bh, ih = tab_h[th]
    nw, bw, iw = tab_w[tw]
    nc = -(-Co // tc)
    C = layer["in"][2]
    split = tk is not None and tk < C
    ic = in_tile_c(layer, tc, tk if split else None)
    nk = -(-C // tk) if split else 1
    q = constants(layer, target, buffering)
    q.update({
        "tile_h": th, "tile_w": tw, "tile_c": tc,
        "border_h": bh, "border_w": bw, "border_c": Co - (nc - 1) * tc,
        "n_tiles_h": nh, "n_tiles_w": nw, "n_tiles_c": nc, "n_tiles": nh * nw * nc,
        "in_tile_h": ih, "in_tile_w": iw, "in_tile_c": ic,
        "tile_volume": th * tw * tc,
        "in_tile_bytes": layer["n_inputs"] * layer["in_bytes"] * ih * iw * ic,
        "out_tile_bytes": layer["out_bytes"] * th * tw * tc,
        "weight_tile_bytes": tc * (geometry.w_per_k(layer) * tk if split else layer["w_bytes_per_cout"]),
        "param_tile_bytes": tc * layer["param_bytes_per_cout"],
        "tile_k": tk if split else C, "n_chunks": nk, "border_k": C - (nk - 1) * tk if split else C,
        "acc_bytes": ACC_BYTES * th * tw * tc if split else 0,
    })
    if split:       # a step's window: the chunk's channels
        q["patch"] = q["kernel_area"] * tk
    # a split step runs the reference library's accumulating kernel
    # (kernels/reference/split.c), which needs no scratch
    q["scratch_bytes"] = 0 if split else spec.scratch_bytes(q)
    a = spec.align
    one_input = q["in_tile_bytes"] // layer["n_inputs"]
    wbuf = weight_buffers(layer, buffering)
    # an add epilogue (fusion: the add's other input tile beside the output's)
    outs = 1 + layer.get("epilogue", 0)
    q["l1_bytes"] = (buffering * (layer["n_inputs"] * align_up(one_input, a)
                                  + outs * align_up(q["out_tile_bytes"], a))
                     + wbuf * (align_up(q["weight_tile_bytes"], a) + align_up(q["param_tile_bytes"], a))
                     + align_up(q["scratch_bytes"], a) + align_up(q["acc_bytes"], a))
    q["weight_buffers"] = wbuf
    q["epilogue"] = layer.get("epilogue", 0)
    return q


def weight_buffers(layer, buffering):
    """Weight and parameter buffers: one for a layer tiled with every output
    channel ("rows", docs/out_of_core.md: its weights load once), else
    `buffering`."""
    return 1 if layer.get("rows") else buffering


def breakdown(q):
    """The `l1_bytes` of a tiling: the size of ONE buffer of each kind ("in":
    one input's tile), unaligned; "total" is what L1 must hold, every buffer
    aligned, times buffering, times inputs, plus scratch."""
    out = {"in": q["in_tile_bytes"] // q["n_inputs"], "out": q["out_tile_bytes"],
           "weights": q["weight_tile_bytes"], "params": q["param_tile_bytes"],
           "scratch": q["scratch_bytes"], "total": q["l1_bytes"]}
    if q.get("epilogue"):
        out["skip"] = q["out_tile_bytes"]     # the add's other input tile (an add epilogue)
    if q.get("acc_bytes"):
        out["acc"] = q["acc_bytes"]           # a split tiling's partial sums (one buffer)
    return out
