"""Adapter for the PULP-NN-style cluster kernels (kernels/pulp_nn/, API in
kernels/include/tessera/pulp_nn.h): the reference kernels' argument structs,
weight layouts and HWC tile loads, other kernel functions. Layers with what only the reference
kernels implement (reference.reference_only: matmul, parameters per
element, int32 inputs) run on them, compiled in as the fallback.
"""

from . import reference

# what the generated layer code includes to see the kernel functions
HEADERS = ("tessera/pulp_nn.h",)

KERNELS = {"conv2d": "pnn_conv2d", "pointwise": "pnn_pointwise", "depthwise": "pnn_depthwise",
           "linear": "pnn_linear", "maxpool": "pnn_maxpool", "avgpool": "pnn_avgpool", "add": "pnn_add",
           "matmul": "pnn_matmul2"}

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
constant_args = reference.constant_args
tile_args = reference.tile_args


def elementwise_depthwise(layer):
    """A 1x1 depthwise, stride 1, no padding: pnn_depthwise computes it
    elementwise, a bias per element (a positional embedding) too."""
    return (layer.op == "depthwise" and list(layer.kernel) == [1, 1] and list(layer.stride) == [1, 1]
            and not any(layer.pad) and not layer.dilation and not reference.requant_plane(layer))


def kernel_function(layer, graph):
    why = reference.reference_only(layer, graph)
    if why == "parameters per output element" and elementwise_depthwise(layer):
        return KERNELS["depthwise"]
    if why is not None or layer.op not in KERNELS:
        return reference.kernel_function(layer)
    return KERNELS[layer.op]
