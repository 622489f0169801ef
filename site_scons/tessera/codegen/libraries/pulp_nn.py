"""Adapter for the PULP-NN-style cluster kernels (kernels/pulp_nn/, API in
kernels/include/tessera/pulp_nn.h): the reference kernels' argument structs
and weight layouts, other kernel functions, and one different tile load:
a depthwise layer's input tile goes to L1 in CHW order (DORY's hybrid
scheme: the strided DMA transposes, the kernel walks one channel's plane
per core and writes the output HWC). Layers with what only the reference
kernels implement (reference.reference_only: matmul, parameters per
element, int32 inputs) run on them, compiled in as the fallback.
"""

from . import reference

# what the generated layer code includes to see the kernel functions
HEADERS = ("tessera/pulp_nn.h",)

KERNELS = {"conv2d": "pnn_conv2d", "pointwise": "pnn_pointwise", "depthwise": "pnn_depthwise",
           "linear": "pnn_linear", "maxpool": "pnn_maxpool", "avgpool": "pnn_avgpool", "add": "pnn_add"}

# the weight layout, argument structs and their fields are the reference's
args_type = reference.args_type
weights_layout = reference.weights_layout
constant_args = reference.constant_args
tile_args = reference.tile_args


def kernel_function(layer, graph):
    if reference.reference_only(layer, graph) is not None:
        return reference.kernel_function(layer)
    return KERNELS[layer.op]


def input_loader(layer, graph):
    """The tile.h helper that brings a tile's input into L1 (CHW for
    pnn_depthwise; the reference kernels read HWC)."""
    return "tsr_tile_in_chw" if kernel_function(layer, graph) == "pnn_depthwise" else "tsr_tile_in"
