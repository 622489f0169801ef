"""Adapter for the portable reference kernels (kernels/reference/, API in
kernels/include/tessera/kernels.h)."""

import numpy as np

from ...config.views import bias_plane, channel_operand, is_whole, param_arrays, requant_plane
from ..cfmt import int_list

CONV_LIKE = ("conv2d", "pointwise", "depthwise", "linear")
POOLS = ("maxpool", "avgpool")

KERNELS = {"conv2d": "tsr_conv2d", "pointwise": "tsr_pointwise", "depthwise": "tsr_depthwise",
           "linear": "tsr_linear", "maxpool": "tsr_maxpool", "avgpool": "tsr_avgpool", "add": "tsr_add",
           "matmul": "tsr_matmul", "mul": "tsr_mul", "lut": "tsr_lut", "concat": "tsr_concat",
           "resize": "tsr_resize", "softmax": "tsr_softmax", "transpose": "tsr_transpose", "gather": "tsr_gather",
           "layernorm": "tsr_layernorm", "argmax": "tsr_argmax", "lstm": "tsr_lstm_step",
           "reshape": "hal_dma_start"}   # a reshape is DMA alone (codegen/whole.py)
# a recurrent layer's step and projection kernels (codegen.recurrent); ONNX's LSTM and GRU step
RECURRENT = ("tsr_lstm_step", "tsr_lstm_project")
ONNX_RECURRENT = "tsr_onnx_rnn_step"

# ops only the reference kernels implement (the other libraries fall back;
# the data movements are the same loads and stores on any core)
REFERENCE_OPS = ("mul", "lut", "concat", "resize", "softmax", "transpose", "reshape", "gather",
                 "layernorm", "argmax")


def kernel_function(layer, graph=None):
    if layer.op == "lstm" and layer.rnn["cell"] == "ops":
        return KERNELS["linear"]
    if layer.op == "lstm" and layer.rnn["cell"] != "lstm":
        return ONNX_RECURRENT
    if layer.op == "add" and graph is not None and (is_whole(layer, graph) or channel_operand(layer, graph)):
        return "tsr_add_broadcast"
    return KERNELS[layer.op]


def reference_only(layer, graph):
    """Why this layer needs the reference kernels (None when another
    library's may compute it): what only they implement, the integer
    dialects' products of activations, parameters per element, int32
    inputs, per-channel requantization of an add and a pool's int32 sum.
    The other libraries' adapters give such layers to their fallback."""
    if layer.op == "matmul":
        # the libraries' own (pnn_matmul2, tsr_cmsis_matmul) take any offsets
        # and per-element requantization; not int32 operands
        return "int32 inputs" if any(graph.tensor(n).dtype == "int32" for n in layer.inputs) else None
    if layer.op in REFERENCE_OPS:
        return f"the {layer.op} op"
    if layer.in_shift:
        return "TFLite's add (each input rescaled)"
    if layer.dilation and list(layer.dilation) != [1, 1]:
        return "a dilated convolution"
    if layer.requant is not None and layer.requant.neg_mul and layer.op not in CONV_LIKE:
        return "a LeakyRelu folded into the requantization"
    if is_whole(layer, graph) or channel_operand(layer, graph):
        return "broadcasting"
    if requant_plane(layer) or bias_plane(layer):
        return "parameters per output element"
    if any(graph.tensor(name).dtype == "int32" for name in layer.inputs):
        return "int32 inputs"
    if layer.op == "add" and param_arrays(layer):
        return "a per-channel requantization of an add"
    if layer.op == "avgpool" and layer.requant is None:
        return "an int32 sum (no requantization)"
    return None


def args_type(layer, graph=None):
    if layer.op in CONV_LIKE:
        return "tsr_conv_args_t"
    if layer.op in POOLS:
        return "tsr_pool_args_t"
    if layer.op == "matmul":
        return "tsr_matmul_args_t"
    if layer.op == "mul" or (graph is not None and channel_operand(layer, graph)):
        return "tsr_binary_args_t"
    if layer.op == "lut":
        return "tsr_lut_args_t"
    return "tsr_add_args_t"


def weights_layout(layer, w):
    """The weight bytes in memory, output channel major (a channel tile is
    one contiguous run): depthwise [kh][kw][C] becomes [C][kh][kw]."""
    if layer.op == "depthwise":
        return np.ascontiguousarray(w.transpose(2, 0, 1))
    return np.ascontiguousarray(w)


def constant_args(layer, l1, scratch_per_core, prefix, rq_ref, graph):
    """Argument fields fixed for the whole layer."""
    kh, kw = layer.kernel
    sh, sw = layer.stride
    lines = []
    if layer.op in CONV_LIKE or layer.op in POOLS:
        lines += [f"a.kh = {kh};", f"a.kw = {kw};", f"a.sh = {sh};", f"a.sw = {sw};",
                  f"a.input_offset = {layer.input_offset};"]
    if layer.dilation and list(layer.dilation) != [1, 1]:
        lines += [f"a.dh = {layer.dilation[0]};", f"a.dw = {layer.dilation[1]};"]
    if layer.weight_offset:
        lines.append(f"a.weight_offset = {layer.weight_offset};")
    if layer.op in CONV_LIKE and scratch_per_core:
        lines += [f"a.scratch = {prefix}_L1 + {l1['scratch']};", f"a.scratch_bytes = {scratch_per_core};"]
    if layer.op == "add":
        lines += [f"a.in_mul[0] = {layer.in_mul[0]};", f"a.in_mul[1] = {layer.in_mul[1]};",
                  f"a.in_offset[0] = {layer.in_offset[0]};", f"a.in_offset[1] = {layer.in_offset[1]};"]
        if layer.in_shift:
            lines += [f"a.in_shift[0] = {layer.in_shift[0]};", f"a.in_shift[1] = {layer.in_shift[1]};"]
    if layer.op == "matmul":
        lines += [f"a.k = {graph.tensor(layer.inputs[0]).shape[2]};", f"a.a_offset = {layer.in_offset[0]};",
                  f"a.b_offset = {layer.in_offset[1]};"]
        if layer.trans_b:
            lines.append("a.trans_b = 1;")
        if scratch_per_core:
            lines += [f"a.scratch = {prefix}_L1 + {l1['scratch']};", f"a.scratch_bytes = {scratch_per_core};"]
    if layer.op in POOLS + ("add",) and graph.tensor(layer.inputs[0]).dtype == "int32":
        lines.append("a.in_int32 = 1;")
    if layer.op == "mul":
        lines += [f"a.in_offset[0] = {layer.in_offset[0]};", f"a.in_offset[1] = {layer.in_offset[1]};"]
    if channel_operand(layer, graph):   # the [1, 1, C] operand: one value per channel of the tile
        lines += ["a.b_h = 1;", "a.b_w = 1;"]
    if layer.op == "lut" and layer.weights:
        # one table per channel, the layer's weights: each tile's rows come with it
        lines.append("a.per_channel = 1;")
    elif layer.op == "lut":
        # the table lives with the code (constant, read in place)
        lines += [f"static const int8_t lut_table[{len(layer.table)}] = {{\n{int_list(layer.table, indent='        ')}\n    }};",
                  f"a.per_channel = {1 if len(layer.table) > 256 else 0};"]
    if layer.op not in ("maxpool", "lut"):
        lines.append(f"a.rq = {rq_ref};")
    return lines


def tile_args(layer, params, tc_max, prefix, per_channel_rq, graph):
    """Argument fields set for each tile `t` in buffers `b` (data) and `wb`
    (weights and per-channel parameters)."""
    L1 = f"{prefix}_L1"
    lines = []
    pos = {}
    at = 0
    for name, _, size in params:
        pos[name] = at
        at += size * tc_max
    if layer.op in CONV_LIKE:
        lines += [f"a.in = {L1} + l1_in0(b);", "a.in_h = t->ih;", "a.in_w = t->iw;", "a.in_c = t->ic;",
                  f"a.weights = {L1} + l1_w(wb);"]
        if "bias" in pos:
            lines.append(f"a.bias = (const int32_t *)({L1} + l1_p(wb) + {pos['bias']});")
        lines += [f"a.out = {L1} + l1_out(b);", "a.out_h = t->oh;", "a.out_w = t->ow;", "a.out_c = t->oc;",
                  "a.pad_t = t->pad_t;", "a.pad_l = t->pad_l;", "a.pad_b = t->pad_b;", "a.pad_r = t->pad_r;"]
    elif layer.op in POOLS:
        lines += [f"a.in = {L1} + l1_in0(b);", "a.in_h = t->ih;", "a.in_w = t->iw;", "a.c = t->oc;",
                  f"a.out = {L1} + l1_out(b);", "a.out_h = t->oh;", "a.out_w = t->ow;",
                  "a.pad_t = t->pad_t;", "a.pad_l = t->pad_l;", "a.pad_b = t->pad_b;", "a.pad_r = t->pad_r;"]
    elif layer.op == "matmul":
        batches, k, _ = graph.tensor(layer.inputs[1]).shape
        # the right operand's tile is [batches][k][t->oc]; one matrix serves every batch
        at = f" + t->oh0 * {k} * t->oc" if batches > 1 else ""
        lines += [f"a.a = {L1} + l1_in0(b);", f"a.b = {L1} + l1_w(wb){at};",
                  f"a.b_batch = {f'{k} * t->oc' if batches > 1 else 0};", f"a.out = {L1} + l1_out(b);",
                  "a.out_h = t->oh;", "a.out_w = t->ow;", "a.out_c = t->oc;"]
    elif channel_operand(layer, graph):   # the vector's channel block is in the weight buffer
        lines += [f"a.a = {L1} + l1_in0(b);", f"a.b = {L1} + l1_w(wb);", f"a.out = {L1} + l1_out(b);",
                  "a.out_h = a.a_h = t->oh;", "a.out_w = a.a_w = t->ow;", "a.out_c = a.a_c = a.b_c = t->oc;"]
    elif layer.op == "mul":   # same shapes: every operand is the tile
        lines += [f"a.a = {L1} + l1_in0(b);", f"a.b = {L1} + l1_in1(b);", f"a.out = {L1} + l1_out(b);",
                  "a.out_h = a.a_h = a.b_h = t->oh;", "a.out_w = a.a_w = a.b_w = t->ow;",
                  "a.out_c = a.a_c = a.b_c = t->oc;"]
    elif layer.op == "lut":
        lines += [f"a.in = {L1} + l1_in0(b);", f"a.out = {L1} + l1_out(b);", "a.pixels = t->oh * t->ow;",
                  "a.c = t->oc;",
                  f"a.table = {L1} + l1_w(wb);" if layer.weights else
                  "a.table = lut_table + (a.per_channel ? t->oc0 * 256 : 0);"]
    else:  # add
        lines += [f"a.a = {L1} + l1_in0(b);", f"a.b = {L1} + l1_in1(b);", f"a.out = {L1} + l1_out(b);",
                  "a.n = t->oh * t->ow * t->oc;"]
        if per_channel_rq:
            lines += ["a.out_w = t->ow;", "a.out_c = t->oc;"]
    if per_channel_rq:
        lines.append(f"rq.mul = (const int32_t *)({L1} + l1_p(wb) + {pos['mul']});")
        if "add" in pos:
            lines.append(f"rq.add = (const int32_t *)({L1} + l1_p(wb) + {pos['add']});")
        lines.append(f"rq.shift = (const int8_t *)({L1} + l1_p(wb) + {pos['shift']});")
    return lines
