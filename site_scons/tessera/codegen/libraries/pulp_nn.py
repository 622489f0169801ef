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
           "linear": "pnn_linear", "maxpool": "pnn_maxpool", "avgpool": "pnn_avgpool", "add": "pnn_add"}

# fused steps (tessera.codegen.fused): the fused kernel on this library's own
FUSED = {"dw_pw": "pnn_dw_pw"}
# ... run as the shared scheme (fusion/tiler.py): blocks of fd rows by all
# cores, one fork for the block's depthwise and one for its pointwise, so
# that each runs split as it is alone (channels, then pixels) and the stripes
# are gathered once per block; the block's arguments, then the two kernels
FUSED_SCHEME = {"dw_pw": "shared"}
FUSED_PARTS = {"dw_pw": ("pnn_dw_pw_block", "pnn_depthwise", "pnn_pointwise", "pnn_dw_pw_parts")}

# the weight layout, argument structs and their fields are the reference's
args_type = reference.args_type
weights_layout = reference.weights_layout
constant_args = reference.constant_args
tile_args = reference.tile_args


def kernel_function(layer, graph):
    if reference.reference_only(layer, graph) is not None:
        return reference.kernel_function(layer)
    return KERNELS[layer.op]
