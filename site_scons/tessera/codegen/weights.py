"""One C file per layer holding its constants in the weight level: weights
in the kernel library's layout and the per-output-channel parameters."""

import numpy as np

from ..views import param_arrays
from .cfmt import byte_string, header_comment, int_list, section_attr
from .layer import symbol
from .libraries import library


def _channel_values(layer, name, weights, channels):
    if name == "bias":
        return np.asarray(weights[layer.bias], dtype=np.int64)
    values = np.asarray(getattr(layer.requant, name), dtype=np.int64)
    return np.broadcast_to(values, (channels,)) if values.size == 1 else values


def generate(layer, graph, weights, target):
    prefix = target["prefix"]
    section = target["sections"].get("weights", "")
    channels = graph.tensor(layer.output).shape[2]
    lib = library(target["kernels"])
    out = [header_comment([f"tessera: constants of layer {layer.name} (weight level {target['w_level']})."]),
           "#include <stdint.h>\n"]
    if layer.weights:
        data = lib.weights_layout(layer, weights[layer.weights]).reshape(-1)
        out.append(f"const int8_t {symbol(prefix, layer.name, 'weights')}[{data.size}] {section_attr(section)} =")
        out.append(byte_string(data) + ";\n")
    ctypes = {"int32_t": np.int32, "int8_t": np.int8}
    for name, ctype, _ in param_arrays(layer):
        values = _channel_values(layer, name, weights, channels)
        assert values.size == channels
        info = np.iinfo(ctypes[ctype])
        assert values.min() >= info.min and values.max() <= info.max, (layer.name, name)
        out.append(f"const {ctype} {symbol(prefix, layer.name, name)}[{channels}] {section_attr(section)} = {{")
        out.append(int_list(values) + "\n};\n")
    return "\n".join(out)
