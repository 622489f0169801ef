"""Data movement as index arrays: transposes, reshapes, gathers, slices and
splits, composed at import and emitted as the fewest IR layers.

A chain of data-movement operators (a channel shuffle is TRANSPOSE ->
RESHAPE -> TRANSPOSE -> RESHAPE -> GATHER -> TRANSPOSE) computes no value:
each output element is one input element. So each operator is applied to
an array of *indices* into the source tensor's HWC data instead of to the
values, exactly as numpy applies it to values, and when a layer finally
reads the result, `classify` says which single IR layer moves the source
into that order: none (the same order: the source itself, or a reshape),
a `transpose` of the source's [H, W, C], or a `gather` along one axis (a
channel shuffle, a split, a strided slice). Shape computations (SHAPE ->
STRIDED_SLICE -> PACK feeding a RESHAPE) run through the same functions on
their constant values, so they fold to constants.

Everything here is plain numpy on integer arrays, shared by the TFLite and
ONNX importers.
"""

import itertools

import numpy as np


def identity(shape):
    """The index array of a tensor read in place: element i is i."""
    return np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape([int(d) for d in shape])


def strided_slice(a, begin, end, strides, begin_mask=0, end_mask=0, shrink_mask=0):
    """numpy's a[begin:end:strides] with TFLite's masks (a set bit i of
    begin_mask / end_mask: that axis starts / ends at its extreme; of
    shrink_mask: the axis is indexed by begin and dropped)."""
    index = []
    for i in range(a.ndim):
        if i >= len(begin):
            index.append(slice(None))
            continue
        s = int(strides[i]) if i < len(strides) else 1
        if shrink_mask >> i & 1:
            b = int(begin[i])
            index.append(b + a.shape[i] if b < 0 else b)
            continue
        b = None if begin_mask >> i & 1 else int(begin[i])
        e = None if end_mask >> i & 1 else int(end[i])
        index.append(slice(b, e, s))
    return a[tuple(index)]


def split(a, axis, sizes):
    """The pieces of a along axis, of the given sizes (SPLIT, SPLIT_V)."""
    cuts = np.cumsum([0] + [int(s) for s in sizes])
    return [np.take(a, np.arange(cuts[k], cuts[k + 1]), axis=axis) for k in range(len(sizes))]


def classify(flat, src_shape):
    """How to bring the source [H, W, C] into the order `flat` (the index
    array of the wanted tensor, flattened):

        ("same",)                       the source's own order (in place, or a reshape)
        ("transpose", perm, shape)      source.transpose(perm), of that shape
        ("gather", axis, table, shape)  take(source, table, axis), of that shape
        ("rows_cols", rows, cols, shape) rows and columns picked, channels kept
                                        (a nearest upsampling written as TILEs)
        None                            none of these (one IR layer cannot do it)
    """
    flat = np.asarray(flat, dtype=np.int64).reshape(-1)
    size = int(np.prod(src_shape))
    src_shape = [int(d) for d in src_shape]
    base = np.arange(size, dtype=np.int64).reshape(src_shape)
    if flat.size == size:
        if np.array_equal(flat, base.reshape(-1)):
            return ("same",)
        for perm in itertools.permutations(range(3)):
            if list(perm) != [0, 1, 2] and np.array_equal(flat, base.transpose(perm).reshape(-1)):
                return ("transpose", list(perm), [src_shape[p] for p in perm])
    for axis in (2, 0, 1):
        rest = size // src_shape[axis]
        if flat.size % rest:
            continue
        shape = list(src_shape)
        shape[axis] = flat.size // rest
        coords = np.unravel_index(flat.reshape(shape), src_shape)
        grid = np.indices(shape)
        if all(np.array_equal(coords[b], grid[b]) for b in range(3) if b != axis):
            table = np.moveaxis(coords[axis], axis, 0).reshape(shape[axis], -1)
            if np.all(table == table[:, :1]):
                return ("gather", axis, [int(v) for v in table[:, 0]], shape)
    # out[h, w, c] = src[rows[h], cols[w], c]: H and W both picked
    c = src_shape[2]
    if flat.size % c == 0:
        coords = np.unravel_index(flat.reshape(-1, c), src_shape)
        if np.all(coords[2] == np.arange(c)) and np.all(coords[0] == coords[0][:, :1]) \
                and np.all(coords[1] == coords[1][:, :1]):
            r, q = coords[0][:, 0], coords[1][:, 0]
            # a grid: the row picked depends on the output row only, the column on the column
            for ho in range(1, len(r) + 1):
                if len(r) % ho:
                    continue
                wo = len(r) // ho
                rr, qq = r.reshape(ho, wo), q.reshape(ho, wo)
                if np.all(rr == rr[:, :1]) and np.all(qq == qq[:1, :]):
                    return ("rows_cols", [int(v) for v in rr[:, 0]], [int(v) for v in qq[0]], [ho, wo, c])
    return None


def reduce_groups(idx, axes, src_shape):
    """A mean over `axes` of a tensor whose index array is idx: the source
    axes it sums over (a subset of H and W: an average pool) and the index
    array of its output in the pooled source, or None when the groups are
    not whole boxes of the source along H and/or W.

    Each output element averages the source elements of its group; the
    groups must be the full extent of some source axes B with every other
    coordinate fixed."""
    axes = sorted({int(a) % idx.ndim for a in axes})
    keep = [a for a in range(idx.ndim) if a not in axes]
    groups = np.transpose(idx, keep + axes).reshape(-1, int(np.prod([idx.shape[a] for a in axes], dtype=np.int64)))
    coords = np.unravel_index(groups, src_shape)
    varying = [b for b in range(3) if not np.all(coords[b] == coords[b][:, :1])]
    if any(b == 2 for b in varying):
        return None
    pooled = [1 if b in varying else src_shape[b] for b in range(3)]
    if groups.shape[1] != int(np.prod([src_shape[b] for b in varying], dtype=np.int64)):
        return None
    # every group covers its box once: as many distinct source elements as the box has
    ordered = np.sort(groups, axis=1)
    if np.any(ordered[:, 1:] == ordered[:, :-1]):
        return None
    first = [c[:, 0] for c in coords]
    out = np.ravel_multi_index([np.zeros_like(first[b]) if b in varying else first[b] for b in range(3)], pooled)
    return varying, pooled, out.reshape([idx.shape[a] for a in keep])


# ---- ONNX tensors and tessera's [H, W, C] ----------------------------------
# An ONNX activation is tessera's tensor in one of two orders (frontend.layout):
# channel first ("chw": NCHW, NCL, NC) or as it is ("hwc": the ONNX element
# order is the HWC order, [1, N, K] is [1, N, K]).

def onnx_index(ir_shape, onnx_shape, layout):
    """The index array of an ONNX tensor of `onnx_shape` held by an IR
    tensor of `ir_shape` in `layout`: element (n, c, h, w) of an NCHW
    tensor is IR element (h, w, c)."""
    base = identity(ir_shape)
    if layout == "hwc" or len(onnx_shape) <= 2:
        return base.reshape(onnx_shape)
    if len(onnx_shape) == 4:
        return base.transpose(2, 0, 1).reshape(onnx_shape)
    if len(onnx_shape) == 3:
        return base[0].T.reshape(onnx_shape)
    return None


def ir_order(idx, layout):
    """An ONNX tensor's index array in the IR order of `layout` (flat)."""
    if layout == "hwc" or idx.ndim <= 2:
        return idx.reshape(-1)
    if idx.ndim == 4:
        return idx[0].transpose(1, 2, 0).reshape(-1)
    if idx.ndim == 3:
        return idx[0].T.reshape(-1)
    return None
