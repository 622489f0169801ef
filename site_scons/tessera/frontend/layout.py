"""ONNX arrays <-> tessera's stored [H, W, C] arrays, for the integer dialects.

An ONNX activation is either channel first ("chw": NCHW, NCL, NC, and any
flattening of those, as convolutions see them) or channel last ("hwc": the
rows of a MatMul/Gemm operand, [M, K] or [B, M, K], whose last axis is the
one the product contracts). Both keep the ONNX element order, so a reshape
(Flatten, Reshape) never moves data; only "chw" needs a transpose.
"""

import numpy as np

from ..errors import FrontendError

LAYOUTS = ("chw", "hwc")


def ir_shape(shape, layout, where):
    """[H, W, C] of an ONNX activation shape in `layout` (batch 1)."""
    shape = [int(d) for d in shape]
    if layout == "hwc":
        if len(shape) == 1:
            return [1, 1, shape[0]]
        lead = shape[:-2]
        h = int(np.prod(lead)) if lead else 1
        return [h, shape[-2], shape[-1]]
    if len(shape) == 4:
        n, c, h, w = shape
    elif len(shape) == 3:
        (n, c, w), h = shape, 1
    elif len(shape) == 2:
        (n, c), h, w = shape, 1, 1
    else:
        raise FrontendError(where, f"activation of rank {len(shape)} ({shape}) is not supported",
                            "use NCHW, NCL or NC tensors")
    if n != 1:
        raise FrontendError(where, f"batch size {n} (shape {shape})", "export the model with batch size 1")
    return [h, w, c]


def to_hwc(arr, layout, hwc):
    """An array in ONNX element order -> stored [H, W, C] order."""
    h, w, c = hwc
    arr = np.asarray(arr)
    if layout == "hwc":
        return arr.reshape(h, w, c)
    return arr.reshape(c, h, w).transpose(1, 2, 0)


def from_hwc(arr, layout, shape):
    """A stored [H, W, C] array -> the ONNX array of `shape`."""
    arr = np.asarray(arr)
    if layout == "hwc":
        return arr.reshape(shape)
    return arr.transpose(2, 0, 1).reshape(shape)


def broadcast_param(arr, onnx_shape, where, what):
    """A per-tensor/channel/row/element parameter broadcast to the ONNX
    activation shape it applies to."""
    arr = np.asarray(arr)
    if any(d < 1 for d in onnx_shape):
        raise FrontendError(where, f"{what} apply to an activation of shape {list(onnx_shape)}, with a dimension "
                            "below 1", "check the model's input and weight shapes")
    if arr.size == 1:
        return np.broadcast_to(arr.reshape(()), onnx_shape)
    try:
        out = np.broadcast_to(arr, onnx_shape)
        if list(np.broadcast_shapes(arr.shape, tuple(onnx_shape))) == list(onnx_shape):
            return out
    except ValueError:
        pass
    # QuantLib writes per-channel parameters as (C, 1, 1) also for 3D NCL
    # tensors, where NumPy broadcasting would add an axis: channel axis 1.
    flat = arr.reshape(-1)
    if len(onnx_shape) >= 2 and flat.size == onnx_shape[1] and sum(d > 1 for d in arr.shape) == 1:
        shape = [1, flat.size] + [1] * (len(onnx_shape) - 2)
        return np.broadcast_to(flat.reshape(shape), onnx_shape)
    raise FrontendError(where, f"{what} of shape {list(arr.shape)} does not broadcast to the "
                        f"activation shape {list(onnx_shape)}",
                        "use a scalar, per-channel or per-row parameter")


def compress(hwc_arr):
    """Shrink to size 1 the axes along which a [H, W, C] array is constant:
    (values, shape) with shape None when it is per channel (or per tensor)."""
    a = np.asarray(hwc_arr)
    # a broadcast view is constant along its stride-0 axes: shrink those first,
    # without materializing (a parameter under a huge activation)
    for axis in (0, 1, 2):
        if a.shape[axis] > 1 and a.strides[axis] == 0:
            a = a[(slice(None),) * axis + (slice(0, 1),)]
    for axis in (0, 1, 2):
        if a.shape[axis] > 1 and np.all(a == a.take([0], axis=axis)):
            a = a.take([0], axis=axis)
    if a.shape[0] == 1 and a.shape[1] == 1:
        return a.reshape(-1), None
    return a, list(a.shape)


def params_hwc(arrays, onnx_shape, layout, hwc, where, what):
    """Requantization parameters (ONNX-shaped, broadcastable) -> lists for
    ir.Requant, per channel where they allow it, else with a common shape."""
    conv = [to_hwc(broadcast_param(a, onnx_shape, where, what), layout, hwc) for a in arrays]
    packed = [compress(a) for a in conv]
    if all(shape is None for _, shape in packed):
        return [v.astype(np.int64).tolist() for v, _ in packed], None
    shape = [1, 1, 1]
    for v, s in packed:
        s = s or [1, 1, v.size]
        shape = [max(a, b) for a, b in zip(shape, s)]
    out = []
    for a in conv:
        # each array is constant along the axes where `shape` is 1
        small = a[:shape[0], :shape[1], :shape[2]].astype(np.int64).reshape(-1)
        out.append([int(small[0])] if np.all(small == small[0]) else small.tolist())
    return out, shape


def stored_axes(shape, layout):
    """The ONNX axes of an activation in the order its stored [H, W, C]
    array walks them (row-major): every axis for "hwc", [N,] H, W, C for
    "chw" (a rank-3 NCL tensor: L, C; NC: C)."""
    rank = len(shape)
    if layout == "hwc" or rank <= 2:
        return list(range(rank))
    return [0] + list(range(2, rank)) + [1]


def canonical_transpose(dims, perm):
    """(dims, perm) of the same data movement with size-1 axes dropped and
    axes that stay adjacent (and in order) merged: a head split [T, h, d]
    -> [h, T, d] stays ([T, h, d], [1, 0, 2]); [T, h, d] -> [h, d, T] is
    ([T, h * d], [1, 0]). An identity is ([n], [0])."""
    keep = [a for a in range(len(dims)) if dims[a] > 1]
    if not keep:
        return [1], [0]
    sizes = [int(dims[a]) for a in keep]
    perm = [keep.index(a) for a in perm if dims[a] > 1]
    # runs of input axes that appear consecutively in the output
    groups = [[perm[0]]]
    for a in perm[1:]:
        if a == groups[-1][-1] + 1:
            groups[-1].append(a)
        else:
            groups.append([a])
    order = sorted(groups, key=lambda g: g[0])          # the groups in input order
    new_dims = [int(np.prod([sizes[a] for a in g])) for g in order]
    new_perm = [order.index(g) for g in groups]
    return new_dims, new_perm


def onnx_transpose(shape, layout, perm, out_layout="hwc"):
    """(dims, perm) on the stored array of an activation (ONNX `shape` in
    `layout`) of ONNX's Transpose(perm), its output stored in `out_layout`
    (channel last in ONNX order by default; "chw" for a feature map a
    convolution reads): canonical (canonical_transpose), or None when it
    moves no data."""
    axes = stored_axes(shape, layout)
    dims = [int(shape[a]) for a in axes]
    out_shape = [shape[int(p)] for p in perm]
    # the output's stored axes, as axes of the input
    walked = [int(perm[a]) for a in stored_axes(out_shape, out_layout)]
    dims, perm = canonical_transpose(dims, [axes.index(a) for a in walked])
    return None if perm == list(range(len(perm))) else (dims, perm)


def three_axes(dims, perm):
    """A canonical transpose on the IR's three axes (leading 1s), or None
    when it needs more."""
    if len(dims) > 3:
        return None
    k = 3 - len(dims)
    return [1] * k + list(dims), list(range(k)) + [p + k for p in perm]


def strided_transpose(order):
    """(dims, perm) on three axes such that the source's values viewed as
    dims and permuted by perm, in row-major order, are `order` (the index
    array of the wanted tensor, any shape: element i holds the source
    element it takes; an ONNX head split [1, T, h, d] -> [1, h, T, d] is
    dims [T, h, d], perm [1, 0, 2], a head merge back is [h, T, d], perm
    [1, 0, 2]); None when `order` is not such a permutation of all the
    source's values.

    The order is read as nested loops, innermost first: the longest run
    stepping by one stride, repeated with the next stride, and so on."""
    flat = np.asarray(order, dtype=np.int64).reshape(-1)
    n = flat.size
    if n == 0 or flat[0] != 0:
        return None
    sizes, strides, block = [], [], 1
    while block < n:
        step = int(flat[block])
        m = 1
        while (m + 1) * block <= n and np.array_equal(flat[m * block:(m + 1) * block], flat[:block] + m * step):
            m += 1
        if m == 1:
            return None
        sizes.append(m)
        strides.append(step)
        block *= m
    if block != n:
        return None
    sizes, strides = sizes[::-1], strides[::-1]        # outermost first
    axes = list(range(len(sizes)))
    order_ = sorted(axes, key=lambda a: -strides[a])     # the source's axes, outermost first
    expect = 1
    for a in reversed(order_):
        if strides[a] != expect:
            return None
        expect *= sizes[a]
    if expect != n:
        return None
    dims, perm = canonical_transpose([sizes[a] for a in order_], [order_.index(a) for a in axes])
    return three_axes(dims, perm)
