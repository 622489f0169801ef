"""Adapter for the Cortex-M kernels (kernels/cmsis_nn/, API in
kernels/include/tessera/cmsis_nn.h): the same argument structs as the
reference kernels, other kernel functions.

It decides per layer. Convolutions, depthwise and linear layers run on the
CMSIS-NN API (tsr_cmsis_* call arm_convolve_s8 & co.) when their arithmetic
is CMSIS-NN's; that holds for standard QDQ models:

    int8 output, y = clamp(((acc * mul + 2^(s-1)) >> s) + zero_point, lo, hi)

with rounding half up, no additive term, 1 <= s <= 62, and offsets in
CMSIS-NN's documented ranges. That is CMSIS-NN's requantization built with
CMSIS_NN_USE_SINGLE_ROUNDING (multiplier = mul, shift = 31 - s):
floor((v >> (s-1)) + 1) / 2) = floor((v + 2^(s-1)) / 2^s) for any integer v,
checked in tests/test_cmsis_nn.py. Convolutions, depthwise, pointwise
and linear layers with other arithmetic (floor rounding and
Requant.divisor from NEMO/DORY graphs, a RequantShift `add`, int32
outputs, TF1-style uint8 weights' weight offset) run on this library's own DSP kernels with tessera's whole
requantization (tsr_cmsis_*_rq, any_rq.c). Other layers go to the
reference kernels, compiled in as the library's fallback, and so does
every layer
with what only the reference kernels implement (reference.reference_only:
matmul, parameters per element, int32 inputs). Max pooling always runs on
arm_max_pool_s8; average pooling and add have tessera's semantics, which
CMSIS-NN's differ from, and run on this library's own DSP kernels.
"""

from dataclasses import replace

from . import reference

# what the generated layer code includes to see the kernel functions
HEADERS = ("tessera/cmsis_nn.h",)

KERNELS = {"conv2d": "tsr_cmsis_conv2d", "pointwise": "tsr_cmsis_pointwise", "depthwise": "tsr_cmsis_depthwise",
           "linear": "tsr_cmsis_linear", "maxpool": "tsr_cmsis_maxpool", "avgpool": "tsr_cmsis_avgpool",
           "add": "tsr_cmsis_add", "matmul": "tsr_cmsis_matmul",
           "concat": "tsr_cmsis_concat", "mul": "tsr_cmsis_mul", "resize": "tsr_cmsis_resize"}

# the recurrent step and projection (codegen.recurrent, kernels/cmsis_nn/recurrent.c)
ONNX_RECURRENT = "tsr_cmsis_onnx_rnn_step"
RECURRENT = ("tsr_cmsis_lstm_step", "tsr_cmsis_lstm_project")

# fused steps (tessera.codegen.fused, kernels/cmsis_nn/fused.c): the
# library's own layer kernels over an intermediate in L1, one after the
# other per block (fd rows for DW->PW and PW->DW row-wise, fd channels for
# PW->DW); the fused tiler sizes the `layers` scheme's buffers
# (fusion/tiler.py)
FUSED = {"dw_pw": "tsr_cmsis_dw_pw", "pw_dw": "tsr_cmsis_pw_dw", "pw_dw_rows": "tsr_cmsis_pw_dw_rows"}
FUSED_SCHEME = {"dw_pw": "layers", "pw_dw": "layers"}


def fused_kernel(kind, dw, pw, graph):
    """The fused step's kernel (kind: dw_pw, pw_dw or pw_dw_rows): the
    library's when both layers run on its kernels apart with an int8
    output (CMSIS-NN's API, TFLite's form or tessera's others: fused.c
    runs each layer the same way), else the reference (int32 outputs,
    what only the reference kernels take; it needs no more L1 than the
    `layers` scheme counts)."""
    own = (KERNELS, TFL_KERNELS, RQ_KERNELS)
    if all(layer.requant is not None and any(kernel_function(layer, graph) == k.get(layer.op) for k in own)
           for layer in (dw, pw)):
        return FUSED[kind]
    return f"tsr_{kind}"


# the weight layout, argument structs and their fields are the reference's
args_type = reference.args_type
weights_layout = reference.weights_layout
constant_args = reference.constant_args
tile_args = reference.tile_args


def cmsis_semantics(layer):
    """None when CMSIS-NN computes this layer exactly, else why not."""
    rq = layer.requant
    if layer.op == "maxpool":
        return None
    if rq is None:
        return "int32 output (no requantization)"
    if layer.weight_offset:
        return "asymmetric uint8 weights (a weight offset: any_rq.c)"
    if layer.op in ("avgpool", "add"):
        # tessera's own kernels: any rounding, but the shift within int64
        return None if all(0 <= s <= 62 for s in rq.shift) else "shift out of range"
    if rq.rounding != "half_up":
        return f"{rq.rounding} rounding"
    if rq.neg_mul:
        return "a LeakyRelu folded into the requantization"
    if any(rq.add):
        return "an additive requantization term"
    if not all(1 <= s <= 62 for s in rq.shift):
        return "a right shift outside 1..62"
    if not all(0 <= m < 2 ** 31 for m in rq.mul):
        return "a multiplier outside int32"
    if not -127 <= layer.input_offset <= 128:
        return "an input offset outside CMSIS-NN's [-127, 128]"
    if not -128 <= rq.zero_point <= 127 or not -128 <= rq.lo <= rq.hi <= 127:
        return "an output range outside int8"
    return None


def split_kernel(layer, graph):
    """A split reduction's step (kernels/cmsis_nn/split.c): DSP dot
    products, the input offset in an int16 lane beside an int8 input."""
    return "tsr_cmsis_split_step" if -32640 <= layer.input_offset <= 32639 else "tsr_split_step"


# TFLite's two roundings (Requant rounding "tflite") on the same cores
# (kernels/cmsis_nn/tsr_rq.h: TSR_RQ_TFL, TSR_RQ_TFLX; glue.c)
TFL_KERNELS = {"conv2d": "tsr_cmsis_conv2d_tfl", "pointwise": "tsr_cmsis_pointwise_tfl",
               "depthwise": "tsr_cmsis_depthwise_tfl", "linear": "tsr_cmsis_linear_tfl"}

# tessera's other requantizations (DORY's and Deeploy's floor or half up
# with an additive term on the cores, TSR_RQ_K64; Requant.divisor and int32
# outputs in any_rq.c): what CMSIS-NN's API cannot express
RQ_KERNELS = {"conv2d": "tsr_cmsis_conv2d_rq", "pointwise": "tsr_cmsis_pointwise_rq",
              "linear": "tsr_cmsis_linear_rq", "depthwise": "tsr_cmsis_depthwise_rq"}


def _tflite_add(layer, graph):
    """A TFLite ADD (each input rescaled) tsr_cmsis_add takes: two int8
    tensors of one shape and a per-tensor requantization."""
    return (layer.op == "add" and bool(layer.in_shift) and layer.requant is not None
            and layer.requant.rounding == "tflite"
            and reference.reference_only(replace(layer, in_shift=None), graph) is None)


# attention's row-wise ops (rowwise.c): any layer of them (TFLite's softmax
# and a table per channel the kernels hand to the reference ones themselves)
ROWWISE = {"softmax": "tsr_cmsis_softmax", "layernorm": "tsr_cmsis_layernorm", "lut": "tsr_cmsis_lut"}
# data movement (movement.c): any transpose, the reference's rows moved in words
MOVEMENT = {"transpose": "tsr_cmsis_transpose"}
# a dilated conv2d (dilated.c), the reference's arguments
DILATED = "tsr_cmsis_conv2d_dilated"


def kernel_function(layer, graph):
    """The kernel entry point, chosen by the layer's requantization form:
    CMSIS-NN's API (half up), TFLite's, or tessera's others; the
    reference kernels for what only they implement."""
    if _tflite_add(layer, graph):
        return KERNELS["add"]
    if layer.op in ROWWISE:
        return ROWWISE[layer.op]
    if layer.op in MOVEMENT:
        return MOVEMENT[layer.op]
    if layer.op == "lstm":   # a cell of plain ops runs its body on the per-op kernels
        return {"lstm": RECURRENT[0], "ops": KERNELS["linear"]}.get(layer.rnn["cell"], ONNX_RECURRENT)
    if layer.op == "matmul" and reference.reference_only(layer, graph) is None:
        return KERNELS["matmul"]      # tessera's requantization in the kernel (any offsets, planes)
    if layer.op in ("concat", "mul", "resize"):  # the reference's arguments: concat.c, mul.c, resize.c
        return KERNELS[layer.op]
    if (layer.op == "conv2d" and layer.dilation and list(layer.dilation) != [1, 1]
            and reference.reference_only(replace(layer, dilation=None), graph) is None):
        return DILATED   # dilated.c: any requantization; the rest it hands to tsr_conv2d
    if reference.reference_only(layer, graph) is None and layer.op in KERNELS:
        if cmsis_semantics(layer) is None:
            return KERNELS[layer.op]
        # the input offset is added in 16-bit lanes next to an int8 value
        if layer.op in RQ_KERNELS and -255 <= layer.input_offset <= 255:
            rq = layer.requant
            # a weight offset: any_rq.c's own code, whatever the rounding
            if (rq is not None and rq.rounding == "tflite" and not any(rq.add) and not layer.weight_offset
                    and -128 <= rq.zero_point <= 127 and -128 <= rq.lo <= rq.hi <= 127):
                return TFL_KERNELS[layer.op]
            return RQ_KERNELS[layer.op]
    return reference.kernel_function(layer)
