"""One C file per layer holding its constants in the weight level: weights
in the kernel library's layout and the per-output-channel parameters (a
plane of values per channel where they vary per element)."""

import numpy as np

from ..config.views import bias_plane, param_arrays, requant_plane
from .cfmt import byte_string, header_comment, int_list, section_attr
from .layer import symbol
from .libraries import library


def _channel_values(layer, name, weights, channels):
    """[channels, n] values of a parameter array: n = 1 per channel, or the
    plane of h' * w' values each channel's elements read (views.param_arrays)."""
    if name == "bias":
        values = np.asarray(weights[layer.bias], dtype=np.int64)
        plane = bias_plane(layer)
        shape = layer.bias_shape
    else:
        values = np.asarray(getattr(layer.requant, name), dtype=np.int64)
        plane = requant_plane(layer)
        shape = layer.requant.shape
    if plane is None:
        return (np.broadcast_to(values, (channels,)) if values.size == 1 else values).reshape(channels, 1)
    # [h', w', c'] (a size-1 array: every element) -> [c][h'][w'], c' repeated to every channel
    full = np.broadcast_to(values.reshape(shape) if values.size > 1 else values.reshape(1, 1, 1),
                           (plane[0], plane[1], channels))
    return np.ascontiguousarray(full.transpose(2, 0, 1)).reshape(channels, plane[0] * plane[1])


def arrays(layer, graph, weights, target):
    """[(array name, C type, values)] of a layer's constants, in the kernel
    library's layout (what the C arrays, or the storage image, hold)."""
    channels = graph.tensor(layer.output).shape[2]
    out = []
    lib = library(target["kernels"])
    if layer.weights:
        out.append(("weights", "int8_t", lib.weights_layout(layer, weights[layer.weights]).reshape(-1)))
    ctypes = {"int32_t": np.int32, "int8_t": np.int8}
    for name, ctype, size in param_arrays(layer):
        values = _channel_values(layer, name, weights, channels)
        if name == "bias" and hasattr(lib, "bias_values"):
            values = lib.bias_values(layer, graph, values, weights)
        assert values.size * np.dtype(ctypes[ctype]).itemsize == size * channels, (layer.name, name)
        info = np.iinfo(ctypes[ctype])
        assert values.min() >= info.min and values.max() <= info.max, (layer.name, name)
        out.append((name, ctype, values.reshape(-1).astype(ctypes[ctype])))
    return out


def generate(layer, graph, weights, target):
    storage = target.get("storage")
    if storage is not None and layer.name in storage["layers"]:
        # its constants are on the card (storage.bin); nothing in flash
        return header_comment([f"tessera: constants of layer {layer.name}: on the storage level "
                               f"{storage['level']} (storage.bin), none here."]) + "\n"
    prefix = target["prefix"]
    section = target["sections"].get("weights", "")
    out = [header_comment([f"tessera: constants of layer {layer.name} (weight level {target['w_level']})."]),
           "#include <stdint.h>\n"]
    for name, ctype, values in arrays(layer, graph, weights, target):
        if name == "weights":
            out.append(f"const int8_t {symbol(prefix, layer.name, name)}[{values.size}] {section_attr(section)} =")
            out.append(byte_string(values) + ";\n")
        else:
            out.append(f"const {ctype} {symbol(prefix, layer.name, name)}[{values.size}] {section_attr(section)} = {{")
            out.append(int_list(values) + "\n};\n")
    return "\n".join(out)
