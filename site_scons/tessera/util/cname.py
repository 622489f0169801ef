"""C identifiers from ONNX names, in a module of its own: declaring a
build's steps needs the network's C prefix, not the frontend (onnx, numpy)."""

import re


def c_name(text):
    """A C-identifier-safe version of an ONNX name."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_")
    name = re.sub(r"_+", "_", name)
    if not name or name[0].isdigit():
        name = "l" + name
    return name
