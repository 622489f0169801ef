"""ONNX layout and window attributes to tessera's HWC geometry."""

import math

from ..errors import FrontendError
from .onnxgraph import attrs


def hwc(shape, where):
    """[H, W, C] for an ONNX activation shape (batch 1)."""
    if len(shape) == 4:
        n, c, h, w = shape
    elif len(shape) == 3:        # 1D: [N, C, L]
        n, c, w = shape
        h = 1
    elif len(shape) == 2:        # [N, K] vectors, or [M, K] matrices (rows become W)
        n, c = shape
        if n != 1:
            return [1, n, c]
        h = w = 1
    else:
        raise FrontendError(where, f"activation of rank {len(shape)} ({shape}) is not supported",
                            "use NCHW, NCL or NC tensors")
    if n != 1:
        raise FrontendError(where, f"batch size {n}", "export the model with batch size 1")
    return [h, w, c]


def _spatial(node, in_hw, kernel, where, dilated=False):
    """stride and [top, left, bottom, right] pads for a 1D/2D window op."""
    a = attrs(node)
    dims = len(kernel)
    strides = list(a.get("strides", [1] * dims))
    dil = list(a.get("dilations", [1] * dims))
    if any(d != 1 for d in dil) and not dilated:
        raise FrontendError(where, f"dilations {dil} are not supported here", "use dilation 1")
    # SAME padding covers the dilated window
    kernel_ext = [d * (k - 1) + 1 for d, k in zip(dil, kernel)]
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        pads = list(a.get("pads", [0] * (2 * dims)))
    elif auto == "VALID":
        pads = [0] * (2 * dims)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(dims):
            size = in_hw[-dims + i]
            total = max((math.ceil(size / strides[i]) - 1) * strides[i] + kernel_ext[i] - size, 0)
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        pads = begin + end
    else:
        raise FrontendError(where, f"auto_pad={auto} is not supported")
    # a custom operator before it can keep shape inference (and its check of
    # these lengths) from reaching the node
    for what, values, n in (("strides", strides, dims), ("pads", pads, 2 * dims), ("dilations", dil, dims)):
        if len(values) != n:
            raise FrontendError(where, f"{what} {list(values)} for a {dims}-D window (expected {n} values)",
                                "re-export the model")
    if dilated:
        dil = [1, dil[0]] if dims == 1 else [int(d) for d in dil]
    if dims == 1:
        out = [1, strides[0]], [0, pads[0], 0, pads[1]], [1, kernel[0]]
    else:
        out = strides, [pads[0], pads[1], pads[2], pads[3]], list(kernel)
    return out + (dil,) if dilated else out


def conv_geometry(node, in_hwc, w_shape, where):
    a = attrs(node)
    kernel = list(a.get("kernel_shape", w_shape[2:]))
    if len(kernel) not in (1, 2):
        raise FrontendError(where, f"{len(kernel)}D convolution is not supported", "use 1D or 2D")
    stride, pad, kernel, dil = _spatial(node, in_hwc[:2], kernel, where, dilated=True)
    return {"kernel": kernel, "stride": stride, "pad": pad, "group": int(a.get("group", 1)), "dilation": dil}


def pool_geometry(node, in_hwc, where, allow_pad):
    a = attrs(node)
    kernel = list(a["kernel_shape"])
    stride, pad, kernel = _spatial(node, in_hwc[:2], kernel, where)
    if a.get("ceil_mode", 0):
        # ceil_mode adds a partial window at the end: extra end padding
        for axis in (0, 1):
            size = in_hwc[axis] + pad[axis] + pad[axis + 2] - kernel[axis]
            rem = size % stride[axis]
            if rem:
                pad[axis + 2] += stride[axis] - rem
    if any(pad) and not allow_pad:
        raise FrontendError(where, f"average pooling with padding {pad} is not supported",
                            "pool without padding (or count_include_pad semantics are ambiguous)")
    return {"kernel": kernel, "stride": stride, "pad": pad}


def out_hw(in_hwc, geometry):
    kh, kw = [d * (k - 1) + 1 for d, k in zip(geometry.get("dilation", [1, 1]), geometry["kernel"])]
    sh, sw = geometry["stride"]
    top, left, bottom, right = geometry["pad"]
    return [(in_hwc[0] + top + bottom - kh) // sh + 1, (in_hwc[1] + left + right - kw) // sw + 1]
