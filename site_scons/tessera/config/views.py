"""Projections: exactly the data each build step reads.

SCons reruns a step when its inputs' bytes change, so each step gets a
small canonical dict holding only what it uses: the tiler never sees a
description string or the L2 size, the code generator never sees the
solver's heuristics. Change one value in a YAML file and only the steps
whose projection contains it run again.
"""

import os

from .. import ir
from . import load_yaml, usable_bytes
from ..errors import ConfigError
from ..util import paths

KERNELS_DIR = paths.KERNELS


# the key under which a report holds each runner's count (target YAML:
# runner.counts), read by the report and by the selector's measured costs
COUNT_KEYS = {"qemu-instructions": "instructions", "gvsoc-cycles": "cycles", "host-ns": "host_ns"}


def per_channel(values):
    return len(values) > 1


def param_plane(shape):
    """[h', w'] of parameters shaped [h', w', c'] when they vary along rows or
    columns (one plane of h' * w' values per channel, see kernels.h), else None."""
    if shape is None or shape[0] * shape[1] == 1:
        return None
    return [int(shape[0]), int(shape[1])]


def requant_plane(layer):
    rq = layer.requant
    return param_plane(rq.shape) if rq is not None else None


def bias_plane(layer):
    return param_plane(layer.bias_shape) if layer.bias else None


def param_arrays(layer):
    """The per-output-channel parameter arrays a layer's kernels read, in
    the order they sit in L1: (name, C type, bytes per channel). Parameters
    that vary per element take a plane of values per channel."""
    arrays = []
    if layer.op == "layernorm":
        return arrays     # computed whole: its per-channel constants live in its C file (codegen/whole.py)
    if layer.bias:
        plane = bias_plane(layer)
        arrays.append(("bias", "int32_t", 4 * (plane[0] * plane[1] if plane else 1)))
    rq = layer.requant
    if rq is not None:
        plane = requant_plane(layer)
        n = plane[0] * plane[1] if plane else 1
        if plane or per_channel(rq.mul) or per_channel(rq.shift) or per_channel(rq.add):
            arrays.append(("mul", "int32_t", 4 * n))
            if any(rq.add):
                arrays.append(("add", "int32_t", 4 * n))
            arrays.append(("shift", "int8_t", n))
    return arrays


def whole_constants(layer):
    """The constant arrays a row-wise whole-tensor layer reads for every
    value, copied into L1 beside its blocks (codegen/whole.py; the tiler
    counts them as the layer's params): (name, C type, count). Read in
    place they would be read from L2, by every core at once."""
    if layer.op == "layernorm" and layer.mode == "ilayernorm":
        c = len(layer.table) // 2
        return [("ln_weight", "int32_t", c), ("ln_bias", "int32_t", c)]
    if layer.op == "layernorm" and layer.requant is not None:
        c = len(layer.requant.mul)
        return [("rq_mul", "int32_t", c), ("rq_add", "int32_t", c), ("rq_shift", "int8_t", c)]
    if layer.op == "softmax" and not layer.mode and layer.table:
        return [("softmax_exp", "int32_t", len(layer.table))]
    return []


def whole_constant_bytes(layer, align=4):
    """Bytes of L1 whole_constants takes, each array aligned."""
    size = {"int32_t": 4, "int8_t": 1}
    return sum(-(-n * size[t] // align) * align for _, t, n in whole_constants(layer))


def channel_operand(layer, graph):
    """True for an add or mul of a full tensor (first input, the output's
    shape) and a [1, 1, C] vector (squeeze-and-excitation): tiled like the
    full tensor, the vector's channel block loaded with each channel tile
    like weights (as a matmul's right operand)."""
    if layer.op not in ("add", "mul") or len(layer.inputs) != 2:
        return False
    a, b = (graph.tensor(n) for n in layer.inputs)
    y = graph.tensor(layer.output)
    return (a.dtype == b.dtype == y.dtype == "int8") and a.shape == y.shape and b.shape == [1, 1, y.shape[2]] and y.shape[:2] != [1, 1]


def is_whole(layer, graph):
    """Whether a layer is computed on whole tensors (ir.WHOLE_OPS, and an
    add or mul whose operands differ in shape other than channel_operand)."""
    if layer.op in ir.WHOLE_OPS:
        return True
    return (layer.op in ("add", "mul") and not channel_operand(layer, graph)
            and len({tuple(graph.tensor(n).shape) for n in layer.inputs + [layer.output]}) > 1)


def whole_split(layer):
    """How a whole-tensor layer may still be cut when it does not fit L1:
    "c" (channel blocks: resize is channel-wise), "h" (row blocks, every
    channel: softmax, a channel concat; blocks of output rows of a transpose,
    a reshape or a gather along W or C), or "" (not at all)."""
    if layer.op == "resize" or (layer.op == "gather" and layer.axis == 0):
        return "c"
    if layer.op in ("softmax", "layernorm", "transpose", "reshape", "gather", "argmax") or (
            layer.op == "concat" and layer.axis == 2):
        return "h"
    if layer.op == "concat":
        return "k"      # along H or W: each input in blocks along that axis, into its place
    return ""


def recurrent_l1(layer):
    """What a recurrent layer keeps in L1 beside its sequences: its packed
    constants (as weights) and its states: the int16 cell state, the initial
    hidden state, the gates' int16 pre-activations and, with a projection,
    the cells' int8 hidden values (codegen.recurrent lays them out)."""
    rnn = layer.rnn
    align = lambda n: -(-n // 4) * 4   # noqa: E731
    sizes = {role: align(n * {"int32": 4, "int16": 2}.get(dtype, 1)) for role, (_, n, dtype) in rnn["layout"].items()}
    if rnn["cell"] != "ops":
        # the gate matrices may stream through L1 a block of cells at a time
        gates = len(rnn["gates"]) if rnn["cell"] == "lstm" else (4 if rnn["cell"] == "onnx_lstm" else 3)
        cells = {"gates": gates, "n_cell": rnn["n_cell"],
                 "row_bytes": rnn["n_input"] + (rnn["n_output"] if rnn["cell"] == "lstm" else rnn["n_cell"])}
    if rnn["cell"] in ("onnx_lstm", "onnx_gru"):   # two int16 hidden states, the int32 cell state
        scratch = 2 * align(2 * rnn["n_cell"]) + align(4 * rnn["n_cell"])
        return {"w_bytes_per_cout": ir.weight_bytes_per_cout(layer, None), "scratch_bytes": scratch,
                "sections": dict(sorted(sizes.items())), "cells": cells}
    if rnn["cell"] == "ops":   # its states and every body op's vector
        scratch = sum(align(s["size"]) for s in rnn["states"]) + sum(align(op["n"]) for op in rnn["body"])
        # the linear ops' matrices, which may stream through L1 a block of rows at a time
        matrices = [{"op": k, "role": op["weights"], "rows": op["n"], "cols": rnn["layout"][op["weights"]][1] // op["n"]}
                    for k, op in enumerate(rnn["body"]) if op["op"] == "linear"]
        return {"w_bytes_per_cout": ir.weight_bytes_per_cout(layer, None), "scratch_bytes": scratch,
                "sections": dict(sorted(sizes.items())), "matrices": matrices}
    scratch = (align(2 * rnn["n_cell"]) + align(rnn["n_output"]) + align(2 * len(rnn["gates"]) * rnn["n_cell"])
               + (align(rnn["n_cell"]) if rnn.get("projection") else 0))
    return {"w_bytes_per_cout": ir.weight_bytes_per_cout(layer, None), "scratch_bytes": scratch,
            "sections": dict(sorted(sizes.items())), "cells": cells}


def operand_as_weights(layer, graph):
    """A second input that is loaded per channel tile into the weight buffer."""
    return layer.op == "matmul" or channel_operand(layer, graph)


def transpose_view(layer, graph):
    """(dims, perm) of a transpose as its kernel runs it: the input viewed as
    `dims` (or its shape) without its axes of 1, so a block of output rows
    is a real cut and the kernel's rows are long: two axes left take a 1
    between them ([1, T, K] -> [1, K, T] runs as [T, 1, K] -> [K, 1, T]: K
    rows of T values, in blocks of rows), one axis is a row of its own."""
    dims = list(layer.dims or graph.tensor(layer.inputs[0]).shape)
    kept = [k for k in range(3) if dims[k] != 1]
    if len(kept) == 3:
        return dims, list(layer.perm)
    if len(kept) == 2:
        at = {kept[0]: 0, kept[1]: 2}       # the kept axes go to 0 and 2, the 1 to 1
        order = [at[p] for p in layer.perm if p in kept]
        return [dims[kept[0]], 1, dims[kept[1]]], [order[0], 1, order[1]]
    return [1, 1, dims[kept[0]] if kept else 1], [0, 1, 2]


def kernel_shapes(layer, graph):
    """([H, W, C] of the first input, of the output) as the layer's kernel
    walks them: a transpose with `dims` sees its input as dims and writes
    the permuted dims (the same bytes, row-major); a softmax or layernorm,
    computed over the channels of each pixel, sees its pixels as rows
    ([H * W, 1, C]), so a [1, tokens, features] tensor is cut in blocks of
    tokens."""
    x, y = graph.tensor(layer.inputs[0]), graph.tensor(layer.output)
    if layer.op == "transpose":
        dims, perm = transpose_view(layer, graph)
        return dims, [dims[p] for p in perm]
    if layer.op in ("softmax", "layernorm"):
        H, W, C = x.shape
        return [H * W, 1, C], [H * W, 1, C]
    return list(x.shape), list(y.shape)


def tiler_layer(layer, graph):
    """The tiler's view of an IR layer."""
    x = graph.tensor(layer.inputs[0])
    y = graph.tensor(layer.output)
    if is_whole(layer, graph):
        x_shape, y_shape = kernel_shapes(layer, graph)
        return {
            "name": layer.name, "op": layer.op, "whole": 1, "split": whole_split(layer),
            "in": x_shape, "out": y_shape, "kernel": [1, 1], "stride": [1, 1],
            "pad": [0, 0, 0, 0], "in_bytes": ir.DTYPES[x.dtype], "out_bytes": ir.DTYPES[y.dtype],
            "n_inputs": len(layer.inputs), "in_sizes": [graph.tensor(n).size for n in layer.inputs],
            "w_bytes_per_cout": 0, "param_bytes_per_cout": 0, "const_bytes": whole_constant_bytes(layer),
            # a recurrent layer keeps its constants and states in L1 (codegen.recurrent)
            **(recurrent_l1(layer) if layer.op == "lstm" else {}),
            **({"axis": layer.axis} if whole_split(layer) == "k" else {}),
        }
    view = {
        "name": layer.name,
        "op": layer.op,
        "in": list(x.shape),
        "out": list(y.shape),
        "kernel": list(layer.kernel),
        "stride": list(layer.stride),
        "pad": list(layer.pad),
        "in_bytes": ir.DTYPES[x.dtype],
        "out_bytes": ir.DTYPES[y.dtype],
        # a matmul's right operand is tiled like weights: each output
        # channel's column, in every batch (see matmul_operand_bytes)
        "n_inputs": 1 if operand_as_weights(layer, graph) else len(layer.inputs),
        "w_bytes_per_cout": (matmul_operand_bytes(layer, graph) if operand_as_weights(layer, graph)
                             else ir.weight_bytes_per_cout(layer, graph)),
        "param_bytes_per_cout": sum(size for _, _, size in param_arrays(layer)),
    }
    if layer.dilation and list(layer.dilation) != [1, 1]:
        view["dilation"] = list(layer.dilation)
    return view


def matmul_operand_bytes(layer, graph):
    """Bytes per output channel of a matmul's right operand [Bb, K, N] in
    L1: a channel tile holds column block [:, :, c0:c0+tc], every batch."""
    b = graph.tensor(layer.inputs[1])
    return b.shape[0] * b.shape[1] * ir.DTYPES[b.dtype]


def kernel_library(name, path=None):
    """The parsed library.yaml of a kernel library under kernels/."""
    path = path or os.path.join(KERNELS_DIR, name, "library.yaml")
    if not os.path.isfile(path):
        libs = sorted(d for d in os.listdir(KERNELS_DIR)
                      if os.path.isfile(os.path.join(KERNELS_DIR, d, "library.yaml")))
        raise ConfigError(f"kernels: {name}", "unknown kernel library", f"choose one of: {', '.join(libs)}")
    return load_yaml(path)


def tiler_target(target, library):
    """The tiler's view of a target: the tile level's budget, the cores and
    the kernel library's tiler section."""
    tiles = target["memory"][target["place"]["tiles"]]
    return {
        "l1_budget": usable_bytes(tiles),
        "cores": target["cores"],
        "buffering": 2,
        "kernels": library["tiler"],
    }


def memory_target(target):
    """The memory planner's view: levels, their usable bytes and roles, and
    (only when weights reach the tiles through another level) that level."""
    view = {
        "levels": {name: {"size": lvl["size"], "usable": usable_bytes(lvl), "kind": lvl["kind"],
                          "writable": lvl["writable"], "reserved": dict(sorted(lvl["reserved"].items()))}
                   for name, lvl in target["memory"].items()},
        "place": dict(target["place"]),
    }
    staging = weight_staging(target)
    if staging is not None:
        view["staging"] = staging
    spill = activation_spill(target)
    if spill is not None:
        view["spill"] = spill
    storage = storage_view(target)
    if storage is not None:
        view["storage"] = storage
    return view


def storage_view(target):
    """The storage level (docs/out_of_core.md) as the planner and the code
    generator see it: its name, window address, block and the engine that
    joins it to the activation level; None without one (or without that
    engine: then nothing can be swapped)."""
    name = next((n for n, lv in target["memory"].items() if lv["kind"] == "storage"), None)
    if name is None:
        return None
    engine = dma_engine(target, name, target["place"]["activations"])
    if engine is None:
        raise ConfigError(f"{target['path']}: dma", f"no DMA engine between {name} and "
                          f"{target['place']['activations']}", "declare one in the target's dma list")
    lvl = target["memory"][name]
    return {"level": name, "window": lvl["address"], "block": lvl["block"], "engine": engine}


def activation_spill(target):
    """A level activations may move to when the activation level cannot hold
    them: a writable level beyond the activation and tile levels that a DMA
    engine joins to the activation level (GAP8: L3, by the I/O DMA); None
    when the target has none."""
    place = target["place"]
    for name, level in target["memory"].items():
        if (name not in (place["activations"], place["tiles"]) and level["writable"]
                and dma_engine(target, name, place["activations"]) is not None):
            return name
    return None


def weight_staging(target):
    """Where weights stop on their way to the tile level, when no DMA engine
    joins the two (GAP8: L3 -> L2 by the I/O DMA, L2 -> L1 by the cluster
    DMA): the activation level, if engines join it to both; else None (a
    direct engine, or no path at all, which the code generator reports)."""
    place = target["place"]
    w, tiles, acts = place["weights"], place["tiles"], place["activations"]
    if w == tiles or dma_engine(target, w, tiles) is not None:
        return None
    if dma_engine(target, w, acts) is not None and dma_engine(target, acts, tiles) is not None:
        return acts
    return None


def dma_engine(target, src, dst):
    """Index of the DMA engine between two levels (either direction), or None."""
    for i, dma in enumerate(target["dma"]):
        if {dma["src"], dma["dst"]} == {src, dst}:
            return i
    return None
