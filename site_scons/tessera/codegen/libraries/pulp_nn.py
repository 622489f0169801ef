"""Adapter for the PULP-NN-style cluster kernels (kernels/pulp_nn/, API in
kernels/include/tessera/pulp_nn.h): the reference kernels' argument structs,
weight layouts and HWC tile loads, other kernel functions. Layers with what only the reference
kernels implement (reference.reference_only: parameters per element but
an elementwise depthwise's, int32 inputs) run on them, compiled in as the
fallback, and so do convolutions with a weight offset (TF1-style asymmetric
uint8 weights).
"""

import numpy as np

from ...config.views import bias_plane
from . import reference

# what the generated layer code includes to see the kernel functions
HEADERS = ("tessera/pulp_nn.h",)

KERNELS = {"conv2d": "pnn_conv2d", "pointwise": "pnn_pointwise", "depthwise": "pnn_depthwise",
           "linear": "pnn_linear", "maxpool": "pnn_maxpool", "avgpool": "pnn_avgpool", "add": "pnn_add",
           "matmul": "pnn_matmul2"}
# attention's row-wise ops (rowwise.c): any layer of them (a form a kernel
# does not speed up, TFLite's softmax or a table per channel, it hands to
# the reference kernel itself)
ROWWISE = {"softmax": "pnn_softmax", "layernorm": "pnn_layernorm", "lut": "pnn_lut"}
# data movement (movement.c): any transpose, the reference's rows moved in words
MOVEMENT = {"transpose": "pnn_transpose"}

# the recurrent step and projection (codegen.recurrent, kernels/pulp_nn/recurrent.c)
ONNX_RECURRENT = "pnn_onnx_rnn_step"
RECURRENT = ("pnn_lstm_step", "pnn_lstm_project")

# fused steps (tessera.codegen.fused): the fused kernel on this library's own
FUSED = {"dw_pw": "pnn_dw_pw"}
# ... run as the shared scheme (fusion/tiler.py): blocks of fd rows (DW->PW)
# or fd channels (PW->DW) by all cores, one fork for the block's first
# layer and one for its second, so that each runs split as it is alone
# (depthwise: channels, pointwise: pixels) and, DW->PW, the stripes are
# gathered once per block; the block's arguments, the first layer's kernel,
# the second's, where the forks' arguments live (PW->DW: and the block's
# requantization records)
FUSED_SCHEME = {"dw_pw": "shared", "pw_dw": "shared"}
FUSED_PARTS = {"dw_pw": ("pnn_dw_pw_block", "pnn_depthwise", "pnn_pointwise", "pnn_dw_pw_parts"),
               "pw_dw": ("pnn_pw_dw_block", "pnn_pointwise", "pnn_depthwise_block", "pnn_dw_pw_parts",
                         "pnn_pw_dw_rq"),
               # PW->DW row-wise, the shifted buffer (the fused tiling's layout "rows")
               "pw_dw_rows": ("pnn_pw_dw_rows_block", "pnn_pointwise", "pnn_depthwise", "pnn_dw_pw_parts")}

# the weight layout, argument structs and their fields are the reference's
args_type = reference.args_type
weights_layout = reference.weights_layout
tile_args = reference.tile_args


def elementwise_depthwise(layer):
    """A 1x1 depthwise, stride 1, no padding: pnn_depthwise computes it
    elementwise, a bias per element (a positional embedding) too."""
    return (layer.op == "depthwise" and list(layer.kernel) == [1, 1] and list(layer.stride) == [1, 1]
            and not any(layer.pad) and not layer.dilation and not reference.requant_plane(layer))


def split_kernel(layer, graph):
    """A split reduction's step (kernels/pulp_nn/split.c)."""
    return "pnn_split_step"


def folds_offset(layer, graph):
    """Whether the layer's input offset goes into its bias at build time
    (bias[c] + off * sum of channel c's weights, offset 0 in the arguments):
    pointwise and linear layers on these kernels with a bias per channel.
    Their SIMD loop then takes the raw int8 inputs (pv.sdotsp.b), with no
    per-word flip to unsigned and no per-call sums of the weights; the
    portable path gets a plain dot product too. Not a layer with a weight
    offset: it runs on the reference kernels, whose sum of (x + off) *
    (w + weight_offset) the fold would change."""
    return (layer.op in ("pointwise", "linear") and layer.input_offset != 0 and layer.bias is not None
            and not layer.weight_offset and bias_plane(layer) is None
            and reference.reference_only(layer, graph) is None)


def bias_values(layer, graph, values, weights):
    """The bias array's [channels, 1] values as the kernels take them."""
    if not folds_offset(layer, graph):
        return values
    w = np.asarray(weights[layer.weights], dtype=np.int64)
    folded = values + layer.input_offset * w.reshape(w.shape[0], -1).sum(axis=1).reshape(-1, 1)
    assert np.abs(folded).max() < 2**31, (layer.name, "folded bias outside int32")
    return folded


def constant_args(layer, l1, scratch_per_core, prefix, rq_ref, graph):
    lines = reference.constant_args(layer, l1, scratch_per_core, prefix, rq_ref, graph)
    if folds_offset(layer, graph):
        lines = ["a.input_offset = 0;   /* folded into the bias */" if line.startswith("a.input_offset =") else line
                 for line in lines]
    return lines


def kernel_function(layer, graph):
    if layer.op == "lstm":   # a cell of plain ops runs its body on the per-op kernels
        return {"lstm": RECURRENT[0], "ops": KERNELS["linear"]}.get(layer.rnn["cell"], ONNX_RECURRENT)
    if layer.op in ROWWISE:
        return ROWWISE[layer.op]
    if layer.op in MOVEMENT:
        return MOVEMENT[layer.op]
    why = reference.reference_only(layer, graph)
    if why == "parameters per output element" and elementwise_depthwise(layer):
        return KERNELS["depthwise"]
    if why is not None or layer.weight_offset or layer.op not in KERNELS:
        return reference.kernel_function(layer)
    return KERNELS[layer.op]


def dw_split(weights, bias, input_offset, mul, shift, zero_point):
    """tsr_requant_t.split of a 3x3 depthwise layer (kernels/pulp_nn/depthwise.c,
    DW_SPLIT1): (T << 8) | K when every channel's requantization can do
    without mulh, else 0. mul = mh * 2^K + ml * 2^T (T: the zero low bits
    of every channel's multiplier), sh2 = shift - K; the kernel computes
    t = acc * mh + ((acc * ml) >> (K - T)), then (t + (zp << sh2) + 2^(sh2 - 1)) >> sh2
    in 32 bits, which is exact when acc * ml and that sum stay inside int32
    for every accumulator the channel can reach: bias + sum((x + off) * w)
    with x any int8 (the padding the kernel stores, -off, included). The
    first K that passes (all pass alike: the result is exact). weights
    [C, ...] int8, bias [C] or None, mul and shift [C] or [1]."""
    w = np.asarray(weights, dtype=np.int64).reshape(len(weights), -1)
    c = w.shape[0]
    b = np.zeros(c, np.int64) if bias is None else np.broadcast_to(np.asarray(bias, np.int64).reshape(-1), (c,))
    mul = np.broadcast_to(np.asarray(mul, np.int64).reshape(-1), (c,))
    shift = np.broadcast_to(np.asarray(shift, np.int64).reshape(-1), (c,))
    if (mul <= 0).any() or (mul >= 2**31).any() or (shift < 33).any() or (shift > 54).any():
        return 0
    base = b + input_offset * w.sum(axis=1)
    acc = [base + np.where(w > 0, -128 * w, 127 * w).sum(axis=1),
           base + np.where(w > 0, 127 * w, -128 * w).sum(axis=1)]
    t0 = min(int(m & -m).bit_length() - 1 for m in mul.tolist())
    lo, hi = -2**31, 2**31

    def inside(v):   # every element inside int32
        return bool((v >= lo).all() and (v < hi).all())
    for cut in range(t0 + 1, 32):
        mh, ml, sh2 = mul >> cut, (mul & (2**cut - 1)) >> t0, shift - cut
        if (sh2 < 1).any():
            break
        zs = zero_point * 2**sh2
        ok = inside(zs)
        for a in acc:   # t is monotonic in acc: the ends bound it
            low = a * ml
            mid = a * mh + (low >> (cut - t0))
            ok = ok and inside(low) and inside(mid) and inside(mid + zs + 2**(sh2 - 1))
        if ok:
            return t0 << 8 | cut
    return 0


def splits_requant(layer, graph):
    """Whether a layer may take dw_split's requantization: a 3x3 depthwise
    on these kernels with the usual requantization (round half up, no
    additive term, one multiplier per channel or tensor)."""
    rq = layer.requant
    return (layer.op == "depthwise" and list(layer.kernel) == [3, 3] and rq is not None
            and rq.rounding == "half_up" and not any(rq.add) and not rq.neg_mul and rq.shape is None
            and not rq.divisor and not rq.add_shift and not layer.weight_offset and not layer.dilation
            and bias_plane(layer) is None and kernel_function(layer, graph) == KERNELS["depthwise"])


def layer_split(layer, arrays):
    """dw_split of a layer (splits_requant) from its arrays ([kh, kw, C]
    weights, as the graph holds them)."""
    w = np.asarray(arrays[layer.weights])
    bias = arrays[layer.bias].reshape(-1) if layer.bias else None
    return dw_split(w.reshape(-1, w.shape[-1]).T, bias, layer.input_offset, layer.requant.mul,
                    layer.requant.shift, layer.requant.zero_point)
