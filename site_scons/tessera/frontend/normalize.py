"""Normalization: the quantized ONNX that converters ship, made canonical
before the QDQ/QOperator parsers read it.

    model, notes = normalize(model, path, input_shape)

First what onnx and ONNX Runtime already do: free input dimensions pinned
(batch to 1, the others from the model YAML's `input_shape:`), onnx shape
inference, then ONNX Runtime's basic graph optimizations written back to a
model (constant folding, shape subgraphs, identity and dropout removal; at
that level it keeps QDQ as QDQ: it never fuses to QLinear ops). Then
tessera's own rewrites, each an ONNX-to-ONNX rewrite that computes the same
values, so the result still runs in ONNX Runtime:

- an input Transpose (NHWC -> NCHW, Keras `Permute`) is folded into the
  import: the input becomes NCHW, and tessera's HWC input is the original
  NHWC array;
- views (Reshape, Flatten, Squeeze, Unsqueeze, a pure-view Transpose) and
  constant Pads on int8 tensors (between QuantizeLinear and
  DequantizeLinear, as tf2onnx writes them) move after the DequantizeLinear;
- QuantizeLinear -> DequantizeLinear -> QuantizeLinear (a requantization
  between two scales) and a view whose QuantizeLinear has other parameters
  become a 1x1 AveragePool, which tessera lowers to a requantization layer;
- zero Pads (Keras ZeroPadding2D, also chains of them) are folded into the
  next Conv's padding;
- a Transpose to channel-last before a Flatten into a fully connected layer
  (Keras Flatten) becomes a permutation of that layer's weight rows;
- float ops after the network's last DequantizeLinear (Softmax, Sigmoid, ...)
  are cut off: they are left to the application (`notes["float_tail"]`).

`notes` says what changed, for the summary and network.h.
"""

import os
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import FrontendError

VIEWS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
NCHW_FROM_NHWC = [0, 3, 1, 2]
NHWC_FROM_NCHW = [0, 2, 3, 1]
NCL_FROM_NLC = [0, 2, 1]
INT8 = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)


def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class _Graph:
    """Lookups over a ModelProto's graph, rebuilt after each rewrite."""

    def __init__(self, model, path):
        self.model = model
        self.path = path
        self.g = model.graph
        # rewrites edit this list (NodeProto objects stay the same objects);
        # sync() writes it back to the model
        self.nodes = list(model.graph.node)
        self.refresh()

    def sync(self):
        nodes = [onnx.NodeProto() for _ in self.nodes]
        for new, old in zip(nodes, self.nodes):
            new.CopyFrom(old)
        del self.g.node[:]
        self.g.node.extend(nodes)
        return self.model

    def refresh(self):
        self.inits = {i.name: i for i in self.g.initializer}
        self.producer, self.consumers = {}, {}
        for n in self.nodes:
            for o in n.output:
                self.producer[o] = n
            for i in n.input:
                if i:
                    self.consumers.setdefault(i, []).append(n)
        self.outputs = {o.name for o in self.g.output}
        self.shapes, self.types = {}, {}
        for vi in list(self.g.value_info) + list(self.g.input) + list(self.g.output):
            tt = vi.type.tensor_type
            self.types[vi.name] = tt.elem_type
            if tt.HasField("shape"):
                self.shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        for name, init in self.inits.items():
            self.shapes[name] = list(init.dims)
            self.types[name] = init.data_type

    def where(self, node):
        return f"{self.path}: node {node.name or '(unnamed)'!r} ({node.op_type})"

    def const(self, name):
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        prod = self.producer.get(name)
        if prod is not None and prod.op_type == "Constant":
            return numpy_helper.to_array(_attrs(prod)["value"])
        return None

    def const_value(self, name):
        """A constant, also through DequantizeLinear(constant) and
        DequantizeLinear(QuantizeLinear(constant)) (quantize_static quantizes
        a Pad's constant value), else None."""
        v = self.const(name)
        if v is not None:
            return v
        dq = self.producer.get(name)
        if dq is None or dq.op_type != "DequantizeLinear":
            return None
        q = self.const(dq.input[0])
        qn = self.producer.get(dq.input[0])
        if q is None and qn is not None and qn.op_type == "QuantizeLinear":
            x, p = self.const(qn.input[0]), self.qparams(qn)
            if x is None or p is None:
                return None
            lo, hi = (0, 255) if p[2] == "uint8" else (-128, 127)
            q = np.clip(np.rint(x / p[0]) + p[1], lo, hi)
        p = self.qparams(dq)
        if q is None or p is None:
            return None
        return (np.asarray(q, np.float64) - p[1]) * p[0]

    def add_init(self, name, arr):
        name = self.fresh(name)
        self.g.initializer.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def fresh(self, base):
        taken = set(self.producer) | set(self.inits) | {i.name for i in self.g.input}
        taken |= {n.name for n in self.nodes}
        name, i = base, 1
        while name in taken:
            i += 1
            name = f"{base}_{i}"
        return name

    def users(self, name):
        return self.consumers.get(name, [])

    def only_user(self, name):
        users = self.users(name)
        return users[0] if len(users) == 1 and name not in self.outputs else None

    def rename_input(self, old, new):
        """Every reader of `old` reads `new` instead."""
        for n in self.nodes:
            for i, x in enumerate(n.input):
                if x == old:
                    n.input[i] = new

    def remove(self, *nodes):
        drop = {id(n) for n in nodes}
        self.nodes = [n for n in self.nodes if id(n) not in drop]

    def insert_before(self, anchor, *nodes):
        """Insert nodes just before `anchor` (keeps the topological order)."""
        i = next(k for k, n in enumerate(self.nodes) if n is anchor)
        self.nodes[i:i] = list(nodes)

    def qparams(self, node):
        """(scale, zero point) constants of a Q/DQ node, per tensor only."""
        s = self.const(node.input[1])
        z = self.const(node.input[2]) if len(node.input) > 2 and node.input[2] else np.zeros((), np.uint8)
        if s is None or z is None or s.size != 1 or z.size != 1:
            return None
        return float(s.reshape(())), int(z.reshape(())), str(z.dtype)


# ---- 1. what onnx and ONNX Runtime do ------------------------------------

def pin_inputs(model, path, input_shape=None):
    """Give every graph input a static shape: a free first dimension is the
    batch (pinned to 1), other free dimensions come from `input_shape`
    ({input name or "*": [dims]}). Returns the names whose batch was pinned."""
    inits = {i.name for i in model.graph.initializer}
    pinned = []
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    for key in sorted(input_shape or {}):
        if key != "*" and key not in names:
            # a misspelt input name would otherwise be ignored without a word
            raise FrontendError(path, f"input_shape.{key}: the model has no graph input {key!r}",
                                f"its inputs: {', '.join(names)}")
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        given = None
        if input_shape:
            given = input_shape.get(vi.name, input_shape.get("*"))
        if given is not None:
            if len(given) != len(dims):
                raise FrontendError(path, f"input_shape for graph input {vi.name!r} has {len(given)} "
                                    f"dimensions, the input has {len(dims)}",
                                    "give one value per dimension, batch first")
            for d, v in zip(dims, given):
                if d.HasField("dim_value") and d.dim_value != v:
                    raise FrontendError(path, f"input_shape {list(given)} for {vi.name!r} contradicts the "
                                        f"model's fixed dimension {d.dim_value}", "change only free dimensions")
                d.ClearField("dim_param")
                d.dim_value = int(v)
            continue
        free = [i for i, d in enumerate(dims) if not d.HasField("dim_value") or d.dim_value <= 0]
        if free and free[0] == 0:
            dims[0].ClearField("dim_param")
            dims[0].dim_value = 1
            pinned.append(vi.name)
            free = free[1:]
        if free:
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
            raise FrontendError(path, f"graph input {vi.name!r} has free dimensions {shape}",
                                "give them in the model YAML, e.g. input_shape: [1, 3, 96, 96]")
    # shapes inferred for the symbolic batch are stale now
    del model.graph.value_info[:]
    for out in model.graph.output:
        if out.type.tensor_type.HasField("shape"):
            for d in out.type.tensor_type.shape.dim:
                if not d.HasField("dim_value"):
                    d.Clear()
    return pinned


def infer(model, path):
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as err:
        first = (str(err).strip().splitlines() or ["failed"])[0]
        raise FrontendError(path, f"shape inference failed: {first}", "export with static shapes") from None


def ort_basic(model, path):
    """ONNX Runtime's basic graph optimizations, written back to a model.
    At this level ORT keeps QDQ nodes (it only duplicates a DequantizeLinear
    shared by several ops); it does not fuse them into QLinear ops."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.onnx"), os.path.join(tmp, "out.onnx")
        onnx.save(model, src)
        opts = ort.SessionOptions()
        opts.log_severity_level = 4   # a graph it cannot run is named by the gate or the parser, in one line
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.optimized_model_filepath = dst
        try:
            ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
        except Exception:
            # a graph ONNX Runtime cannot run: the parser names what is wrong
            # in it (an op, a type) better than ORT's message would
            return model
        return onnx.load(dst)


# ---- 2. tessera's rewrites ---------------------------------------------------

def _is_int8(g, name):
    return g.types.get(name) in INT8


def _perm(node):
    return list(_attrs(node).get("perm", []))


def _to_channel_first(g, node):
    """The permutation a Transpose NHWC -> NCHW / NLC -> NCL makes, or a
    Reshape [1, H, W, 1] -> [1, 1, H, W] (the same for one channel), else None."""
    if node.op_type == "Transpose":
        perm = _perm(node)
        return perm if perm in (NCHW_FROM_NHWC, NCL_FROM_NLC) else None
    if node.op_type == "Reshape":
        src, dst = g.shapes.get(node.input[0]), g.shapes.get(node.output[0])
        if src and dst and len(src) == 4 and src[3] == 1 and dst == [src[0], 1, src[1], src[2]]:
            return NCHW_FROM_NHWC
    return None


def fold_input_transposes(g, notes):
    """A graph input (float or int8) that reaches a channel-first permute
    (a Transpose NHWC -> NCHW, or its one-channel Reshape) through per-tensor
    Q/DQ and zero Pads only: the input becomes channel-first, the Pads'
    axes are permuted and the permute goes. The firmware's HWC input is the
    user's channel-last array unchanged."""
    for vi in g.g.input:
        if vi.name in g.inits:
            continue
        name, chain, found = vi.name, [], None
        while True:
            users = g.users(name)
            if len(users) != 1 or name in g.outputs:
                break
            u = users[0]
            perm = _to_channel_first(g, u)
            if perm is not None:
                found = (u, perm)
                break
            if u.op_type in ("QuantizeLinear", "DequantizeLinear") or \
                    (u.op_type == "Pad" and len(u.input) > 1 and u.input[1] and g.const(u.input[1]) is not None):
                chain.append(u)
                name = u.output[0]
                continue
            break
        if found is None:
            first = g.users(vi.name)
            if len(first) == 1 and first[0].op_type == "Transpose":
                t = first[0]
                raise FrontendError(g.where(t), f"the graph input {vi.name!r} is permuted by {_perm(t)}",
                                    "tessera folds only an NHWC -> NCHW (or NLC -> NCL) input permute; "
                                    "export the model with that input layout")
            continue
        t, perm = found
        dims = vi.type.tensor_type.shape.dim
        shape = [d.dim_value for d in dims]
        if len(shape) != len(perm):
            continue
        for d, v in zip(dims, [shape[p] for p in perm]):
            d.Clear()
            d.dim_value = v
        for pad in chain:
            if pad.op_type != "Pad":
                continue
            pads = [int(p) for p in g.const(pad.input[1]).reshape(-1)]
            n = len(pads) // 2
            new = [pads[p] for p in perm] + [pads[n + p] for p in perm]
            pad.input[1] = g.add_init((pad.name or "pad") + "_pads_cf", np.asarray(new, np.int64))
        g.rename_input(t.output[0], t.input[0])
        g.remove(t)
        notes.setdefault("input_layout", {})[vi.name] = "nhwc" if len(perm) == 4 else "nlc"
        g.refresh()
        return True
    return False


def _pad_spec(g, node):
    """[(begin, end) per axis] of a constant-mode Pad and its value, or None."""
    a = _attrs(node)
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode != "constant":
        return None
    if len(node.input) > 1 and node.input[1]:
        pads = g.const(node.input[1])
        if pads is None:
            return None
        pads = [int(p) for p in pads.reshape(-1)]
        value = g.const(node.input[2]) if len(node.input) > 2 and node.input[2] else np.zeros(())
        if len(node.input) > 3 and node.input[3]:
            return None         # axes: rare, left to the error path
    else:
        pads = [int(p) for p in a.get("pads", [])]
        value = np.asarray(a.get("value", 0.0))
    if value is None or np.asarray(value).size != 1 or any(p < 0 for p in pads):
        return None
    n = len(pads) // 2
    return list(zip(pads[:n], pads[n:])), np.asarray(value).reshape(()).item()


def _same_params(a, b):
    return a is not None and b is not None and a[0] == b[0] and a[1] == b[1]


def move_int8_ops_after_dq(g, notes):
    """Q (or an int8 graph input) -> view/Pad on int8 -> DequantizeLinear
    becomes Q -> DQ -> the op on float values. A view of int8 values with
    DequantizeLinear parameters other than the source's would reinterpret
    them, not requantize: that is an error naming the node."""
    for node in list(g.nodes):
        if node.op_type not in VIEWS + ("Transpose", "Pad") or not _is_int8(g, node.input[0]):
            continue
        users = g.users(node.output[0])
        if not users or any(u.op_type != "DequantizeLinear" for u in users) or node.output[0] in g.outputs:
            continue
        src = node.input[0]
        prod = g.producer.get(src)
        src_params = g.qparams(prod) if prod is not None and prod.op_type == "QuantizeLinear" else None
        params = [g.qparams(u) for u in users]
        if any(p is None for p in params) or any(p != params[0] for p in params):
            continue
        if src_params is not None and not _same_params(src_params, params[0]):
            raise FrontendError(g.where(node), f"{node.op_type} on int8 values whose QuantizeLinear and "
                                "DequantizeLinear parameters differ (it would reinterpret the values)",
                                "give the view's input and output the same scale and zero point")
        dq = users[0]
        new_dq_out = g.fresh(src + "_dq")
        new_dq = helper.make_node("DequantizeLinear", [src] + list(dq.input[1:]), [new_dq_out],
                                  name=g.fresh((dq.name or "dq") + "_moved"))
        for a in dq.attribute:
            new_dq.attribute.append(a)
        inputs = [new_dq_out] + list(node.input[1:])
        if node.op_type == "Pad":
            spec = _pad_spec(g, node)
            if spec is None or spec[1] != params[0][1]:
                continue          # a Pad whose value is not the zero point is not a zero pad
            inputs = [new_dq_out, node.input[1]] if len(node.input) > 1 else [new_dq_out]
        moved = helper.make_node(node.op_type, inputs, [users[0].output[0]], name=node.name)
        for a in node.attribute:
            if node.op_type == "Pad" and a.name == "value":
                continue          # the int8 zero point is real 0.0 after the DQ
            moved.attribute.append(a)
        g.insert_before(node, new_dq, moved)
        for u in users[1:]:
            g.rename_input(u.output[0], users[0].output[0])
        g.remove(node, *users)
        g.refresh()
        notes.setdefault("rewrites", []).append(f"{node.op_type} {node.name or node.output[0]!r} on int8 moved "
                                                "after its DequantizeLinear")
        return True
    return False


def int8_concat(g, notes):
    """Concat on int8 tensors (between QuantizeLinear and DequantizeLinear)
    becomes DQ -> Concat -> Q with the output's parameters, as QDQ writes it.
    Inputs quantized with other parameters would be reinterpreted: an error."""
    for node in list(g.nodes):
        if node.op_type != "Concat" or not all(_is_int8(g, i) for i in node.input):
            continue
        users = g.users(node.output[0])
        if not users or any(u.op_type != "DequantizeLinear" for u in users):
            continue
        p = g.qparams(users[0])
        if p is None or any(g.qparams(u) != p for u in users):
            continue
        for i in node.input:
            prod = g.producer.get(i)
            if prod is not None and prod.op_type == "QuantizeLinear" and not _same_params(g.qparams(prod), p):
                raise FrontendError(g.where(node), "Concat of int8 tensors quantized with other parameters "
                                    "than its output (it would reinterpret them)",
                                    "give the Concat's inputs its output's scale and zero point")
        dq = users[0]
        new = []
        for k, i in enumerate(node.input):
            new.append(helper.make_node("DequantizeLinear", [i] + list(dq.input[1:]), [g.fresh(f"{i}_dq")],
                                        name=g.fresh(f"{node.name or 'concat'}_dq{k}")))
        out_f = g.fresh(node.output[0] + "_float")
        concat = helper.make_node("Concat", [n.output[0] for n in new], [out_f], name=node.name,
                                  axis=_attrs(node)["axis"])
        q = helper.make_node("QuantizeLinear", [out_f] + list(dq.input[1:]), [node.output[0]],
                             name=g.fresh((node.name or "concat") + "_q"))
        g.insert_before(node, *new, concat, q)
        g.remove(node)
        g.refresh()
        notes.setdefault("rewrites", []).append(f"Concat {node.name or node.output[0]!r} on int8 made QDQ")
        return True
    return False


def _avgpool_requant(g, dq_out, q, rank, hint):
    """DQ output -> AveragePool(1x1) -> q: an elementwise requantization."""
    if rank not in (3, 4):
        raise FrontendError(g.where(q), f"a requantization of a rank-{rank} tensor is not supported",
                            "requantize a 4D (NCHW) or 3D (NCL) tensor")
    out = g.fresh(hint + "_requant")
    pool = helper.make_node("AveragePool", [dq_out], [out], name=g.fresh(hint + "_requant"),
                            kernel_shape=[1] * (rank - 2))
    g.insert_before(q, pool)
    q.input[0] = out


def requant_chains(g, notes):
    """Q(p1) -> DQ -> Q(p2): p1 == p2 is the identity (the second Q's readers
    read the first's output); otherwise a requantization layer. A float view
    between DQ and a Q with other parameters is a requantization before
    the view."""
    for q in list(g.nodes):
        if q.op_type != "QuantizeLinear":
            continue
        x = q.input[0]
        prod = g.producer.get(x)
        views = []
        while prod is not None and prod.op_type in VIEWS and len(g.users(prod.output[0])) == 1:
            views.append(prod)
            prod = g.producer.get(prod.input[0])
        if prod is None or prod.op_type != "DequantizeLinear" or g.const(prod.input[0]) is not None:
            continue
        p1, p2 = g.qparams(prod), g.qparams(q)
        if p1 is None or p2 is None:
            continue
        if p1[:2] == p2[:2] and p1[2] == p2[2]:
            if views or q.output[0] in g.outputs:
                continue          # a same-parameter view: the parser aliases it
            g.rename_input(q.output[0], prod.input[0])
            g.remove(q)
            g.refresh()
            return True
        dq_out = prod.output[0]
        rank = len(g.shapes.get(dq_out) or [])
        if views:
            # requantize before the views, where the tensor is still NCHW
            first = views[-1]
            q2 = helper.make_node("QuantizeLinear", [dq_out] + list(q.input[1:]),
                                  [g.fresh(q.output[0] + "_pre")], name=g.fresh((q.name or "q") + "_pre"))
            dq2 = helper.make_node("DequantizeLinear", [q2.output[0]] + list(q.input[1:]),
                                   [g.fresh(q.output[0] + "_pre_dq")], name=g.fresh((q.name or "q") + "_pre_dq"))
            g.insert_before(first, q2, dq2)
            first.input[0] = dq2.output[0]
            g.refresh()
            _avgpool_requant(g, dq_out, q2, rank, q.name or q.output[0])
        else:
            _avgpool_requant(g, dq_out, q, rank, q.name or q.output[0])
        g.refresh()
        notes.setdefault("rewrites", []).append(
            f"QuantizeLinear {q.name or q.output[0]!r} requantizes from scale {p1[0]:g} to {p2[0]:g}")
        return True
    return False


def _skip_same_qdq(g, name):
    """The float tensor behind DQ(Q(x)) with equal parameters, else name."""
    dq = g.producer.get(name)
    if dq is None or dq.op_type != "DequantizeLinear":
        return name
    q = g.producer.get(dq.input[0])
    if q is None or q.op_type != "QuantizeLinear" or not _same_params(g.qparams(q), g.qparams(dq)):
        return name
    return q.input[0]


def fold_pads(g, notes):
    """A zero Pad on the spatial axes of an NCHW/NCL tensor (with or without
    its own Q/DQ pair) feeding a Conv is folded into the Conv's pads; a Pad
    feeding another such Pad merges with it. A quantized constant pad value
    becomes a plain constant first."""
    for node in list(g.nodes):
        if node.op_type == "Pad" and len(node.input) > 2 and node.input[2] and g.const(node.input[2]) is None:
            v = g.const_value(node.input[2])
            if v is not None and np.asarray(v).size == 1:
                dtype = onnx.helper.tensor_dtype_to_np_dtype(g.types.get(node.input[0]) or 1)
                node.input[2] = g.add_init((node.name or "pad") + "_value", np.asarray(v, dtype).reshape(()))
                g.refresh()
                _drop_dead(g)
                return True
    for node in list(g.nodes):
        if node.op_type not in ("Conv", "Pad"):
            continue
        x = node.input[0]
        behind = _skip_same_qdq(g, x)
        pad = g.producer.get(behind)
        if pad is None or pad.op_type != "Pad":
            continue
        spec = _pad_spec(g, pad)
        if spec is None or spec[1] != 0 or any(p != (0, 0) for p in spec[0][:2]):
            continue
        src = pad.input[0]
        if g.producer.get(src) is None and src not in [i.name for i in g.g.input]:
            continue
        spatial = spec[0][2:]
        if node.op_type == "Conv":
            a = _attrs(node)
            auto = a.get("auto_pad", b"NOTSET")
            if (auto.decode() if isinstance(auto, bytes) else auto) not in ("NOTSET", ""):
                continue
            dims = len(spatial)
            old = list(a.get("pads", [0] * (2 * dims)))
            new = [old[i] + spatial[i][0] for i in range(dims)] + [old[dims + i] + spatial[i][1] for i in range(dims)]
            for attr in list(node.attribute):
                if attr.name == "pads":
                    node.attribute.remove(attr)
            node.attribute.append(helper.make_attribute("pads", new))
            node.input[0] = src
        else:
            spec2 = _pad_spec(g, node)
            if spec2 is None or spec2[1] != 0 or len(spec2[0]) != len(spec[0]):
                continue
            merged = [b1 + b2 for (b1, _), (b2, _) in zip(spec[0], spec2[0])] + \
                     [e1 + e2 for (_, e1), (_, e2) in zip(spec[0], spec2[0])]
            pads_name = g.add_init((node.name or "pad") + "_pads", np.asarray(merged, np.int64))
            del node.input[:]
            node.input.extend([src, pads_name])
            for attr in list(node.attribute):
                if attr.name in ("pads", "value"):
                    node.attribute.remove(attr)
        g.refresh()
        _drop_dead(g)
        notes.setdefault("rewrites", []).append(f"zero Pad {pad.name or pad.output[0]!r} folded into "
                                                f"{node.op_type} {node.name or node.output[0]!r}")
        return True
    return False


def _drop_dead(g):
    """Remove nodes whose outputs nobody reads (repeatedly)."""
    while True:
        g.refresh()
        dead = [n for n in g.nodes
                if all(not g.users(o) and o not in g.outputs for o in n.output)]
        if not dead:
            return
        g.remove(*dead)


def _flatten_to_linear(g, start):
    """The MatMul/Gemm (with its weight DQ) reading `start` through views and
    same-parameter Q/DQ pairs only, with the path, or None."""
    name, seen = start, []
    while True:
        users = g.users(name)
        if len(users) != 1 or name in g.outputs:
            return None
        u = users[0]
        if u.op_type in VIEWS or u.op_type in ("QuantizeLinear", "DequantizeLinear"):
            seen.append(u)
            name = u.output[0]
            continue
        if u.op_type in ("MatMul", "Gemm") and u.input[0] == name:
            return u
        return None


def transposes_into_linear(g, notes):
    """DQ -> Transpose(NCHW -> NHWC) -> Flatten/Reshape -> MatMul/Gemm
    (Keras Flatten): drop the Transpose and permute the weight rows from
    HWC to CHW order instead. A Transpose over a tensor with H = W = 1
    moves no value: it becomes a Reshape."""
    for t in list(g.nodes):
        if t.op_type != "Transpose":
            continue
        perm = _perm(t)
        shape = g.shapes.get(t.input[0])
        if shape is None or None in shape:
            continue
        out_shape = [shape[p] for p in perm]
        if sum(1 for d in shape if d != 1) <= 1:
            shape_name = g.add_init((t.name or "transpose") + "_shape", np.asarray(out_shape, np.int64))
            t.op_type = "Reshape"
            del t.attribute[:]
            t.input.append(shape_name)
            g.refresh()
            return True
        if perm not in (NHWC_FROM_NCHW, [0, 2, 1]):
            continue
        lin = _flatten_to_linear(g, t.output[0])
        if lin is None:
            continue
        wdq = g.producer.get(lin.input[1])
        if wdq is None or wdq.op_type != "DequantizeLinear" or g.const(wdq.input[0]) is None:
            continue
        a = _attrs(lin)
        w = g.const(wdq.input[0])
        trans_b = lin.op_type == "Gemm" and a.get("transB", 0)
        rows = w.T if trans_b else w           # [K, N]
        if len(shape) == 4:
            _, c, h, wd = shape
            # HWC row h*W*C + w*C + c holds what CHW row c*H*W + h*W + w needs
            idx = np.arange(c * h * wd).reshape(h, wd, c).transpose(2, 0, 1).reshape(-1)
        else:
            _, c, length = shape
            idx = np.arange(c * length).reshape(length, c).transpose(1, 0).reshape(-1)
        if rows.shape[0] != idx.size:
            continue
        rows = rows[idx]
        new_w = rows.T if trans_b else rows
        if len(g.users(wdq.input[0])) != 1 or len(g.users(lin.input[1])) != 1:
            continue
        name = g.add_init(wdq.input[0] + "_chw", np.ascontiguousarray(new_w))
        wdq.input[0] = name
        g.rename_input(t.output[0], t.input[0])
        g.remove(t)
        g.refresh()
        notes.setdefault("rewrites", []).append(f"Transpose {t.name or t.output[0]!r} before a flatten "
                                                f"folded into {lin.op_type} {lin.name!r}'s weights")
        return True
    return False


def cut_float_tail(g, notes):
    """Float ops between the last DequantizeLinear and a graph output are
    left to the application: the DequantizeLinear's output becomes the
    graph output. Returns the ops cut, in graph order."""
    cut = []
    new_outputs = []
    for out in list(g.g.output):
        name = out.name
        chain = []
        node = g.producer.get(name)
        while node is not None and node.op_type not in ("DequantizeLinear", "QuantizeLinear") \
                and len([i for i in node.input if i and g.const(i) is None]) == 1:
            chain.append(node)
            src = [i for i in node.input if i and g.const(i) is None][0]
            node = g.producer.get(src)
        if not chain or node is None or node.op_type != "DequantizeLinear":
            new_outputs.append(out)
            continue
        if any(len(g.users(n.input[0])) > 1 for n in chain):
            new_outputs.append(out)
            continue
        cut.extend(reversed(chain))
        vi = onnx.ValueInfoProto()
        vi.name = node.output[0]
        vi.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        new_outputs.append(vi)
        g.remove(*chain)
    if cut:
        del g.g.output[:]
        g.g.output.extend(new_outputs)
        g.refresh()
        notes["float_tail"] = [{"op": n.op_type, "node": n.name or n.output[0]} for n in cut]
    return bool(cut)


def fuse_hardswish(g, notes):
    """ONNX Runtime inlines HardSwish (a function op) as x * HardSigmoid(x)
    with alpha 1/6, beta 0.5: put the HardSwish back, one op for the parser."""
    for hs in list(g.nodes):
        if hs.op_type != "HardSigmoid":
            continue
        a = _attrs(hs)
        if abs(a.get("alpha", 0.2) - 1 / 6) > 1e-6 or abs(a.get("beta", 0.5) - 0.5) > 1e-6:
            continue
        mul = g.only_user(hs.output[0])
        if mul is None or mul.op_type != "Mul" or sorted(mul.input) != sorted([hs.input[0], hs.output[0]]):
            continue
        swish = helper.make_node("HardSwish", [hs.input[0]], [mul.output[0]], name=mul.name or hs.name or mul.output[0])
        g.insert_before(hs, swish)
        g.remove(hs, mul)
        g.refresh()
        return True
    return False


def fold_output_transposes(g, notes):
    """A Transpose NCHW -> NHWC (NCL -> NLC) that makes a graph output: the
    output is the tensor before it, since tessera's HWC output already is
    the channel-last array."""
    for t in list(g.nodes):
        if t.op_type != "Transpose" or _perm(t) not in (NHWC_FROM_NCHW, [0, 2, 1]):
            continue
        if t.output[0] not in g.outputs or g.users(t.output[0]):
            continue
        for out in g.g.output:
            if out.name == t.output[0]:
                out.name = t.input[0]
                out.type.tensor_type.ClearField("shape")
        g.remove(t)
        g.refresh()
        notes.setdefault("output_layout", {})[t.input[0]] = "nhwc" if len(_perm(t)) == 4 else "nlc"
        notes.setdefault("rewrites", []).append(f"output Transpose {t.name or t.output[0]!r} folded "
                                                "(the firmware's output is channel-last)")
        return True
    return False


def mul_by_constant(g, notes):
    """x * c for a (quantized) constant scalar c (tf2onnx's hard sigmoid
    divides by 6 so) is a 1x1 depthwise convolution with weight +-127 at
    scale |c|/127: the same real factor, requantized as every layer is."""
    from .islands import members
    islands = None
    for mul in list(g.nodes):
        if mul.op_type != "Mul":
            continue
        if islands is None:
            islands = members(g)      # a Mul inside an elementwise island (GELU) stays: the island is one table
        if id(mul) in islands:
            continue
        consts = [g.const_value(i) for i in mul.input]
        if sum(v is not None for v in consts) != 1:
            continue
        k = 0 if consts[0] is not None else 1
        c, x = np.asarray(consts[k], np.float64), mul.input[1 - k]
        shape = g.shapes.get(x)
        if c.size != 1 or float(c.reshape(())) == 0.0 or not shape or len(shape) not in (3, 4) or None in shape:
            continue
        c = float(c.reshape(()))
        # a vector re-viewed channel-last (tf2onnx: [1, C, 1, 1] -> [1, 1, 1, C])
        # is multiplied where it is channel-first; the view moves after the
        # Mul's QuantizeLinear, as a view on int8 values
        root, q = x, g.only_user(mul.output[0])
        while g.producer.get(root) is not None and g.producer[root].op_type in VIEWS:
            root = g.producer[root].input[0]
        root_shape = g.shapes.get(root)
        if root != x and not (q is not None and q.op_type == "QuantizeLinear" and q.output[0] not in g.outputs
                              and root_shape
                              and len(root_shape) == 4 and root_shape[2:] == [1, 1]
                              and sum(d != 1 for d in shape) <= 1):
            continue
        shape = root_shape if root != x else shape
        ch = shape[1]
        w = np.full([ch, 1] + [1] * (len(shape) - 2), 127 if c > 0 else -127, np.int8)
        base = mul.name or mul.output[0]
        w_name = g.add_init(base + "_w", w)
        s_name = g.add_init(base + "_w_scale", np.asarray(abs(c) / 127, np.float32))
        z_name = g.add_init(base + "_w_zero_point", np.asarray(0, np.int8))
        dq = helper.make_node("DequantizeLinear", [w_name, s_name, z_name], [g.fresh(base + "_w_dq")],
                              name=g.fresh(base + "_w_dq"))
        if root == x:
            conv = helper.make_node("Conv", [x, dq.output[0]], [mul.output[0]], name=mul.name or base,
                                    group=ch, kernel_shape=[1] * (len(shape) - 2))
            g.insert_before(mul, dq, conv)
        else:
            conv = helper.make_node("Conv", [root, dq.output[0]], [mul.output[0]], name=mul.name or base,
                                    group=ch, kernel_shape=[1, 1])
            # the Q output keeps its name (the check finds it in ONNX Runtime's
            # graph, the same values in the same order); its readers read the view
            q_out = q.output[0]
            view_out = g.fresh(q_out + "_view")
            g.rename_input(q_out, view_out)
            view_shape = g.add_init(base + "_view", np.asarray(g.shapes[mul.output[0]], np.int64))
            view = helper.make_node("Reshape", [q_out, view_shape], [view_out], name=g.fresh(base + "_view"))
            g.insert_before(mul, dq, conv)
            idx = next(i for i, n in enumerate(g.nodes) if n is q)
            g.nodes[idx + 1:idx + 1] = [view]
        g.remove(mul)
        g.refresh()
        _drop_dead(g)
        notes.setdefault("rewrites", []).append(f"Mul {base!r} by the constant {c:g} is a 1x1 depthwise "
                                                "convolution")
        return True
    return False


def recurrent_layouts(g, notes):
    """An LSTM or GRU read time-major ([T, 1, F], the exporters' layout 0)
    through a Transpose (1, 0, 2) of a batch-1, batch-first sequence (and
    its Q/DQ): the Transpose goes and the node reads the batch-first
    sequence (layout 1; for batch 1 its states' shapes are the same). The
    firmware's input is the user's [1, T, F] array."""
    for node in g.nodes:
        if node.op_type not in ("LSTM", "GRU") or _attrs(node).get("layout", 0) != 0:
            continue
        chain, name = [], node.input[0]
        while name in g.producer and g.producer[name].op_type in ("QuantizeLinear", "DequantizeLinear"):
            chain.append(g.producer[name])
            name = chain[-1].input[0]
        t = g.producer.get(name)
        shape = g.shapes.get(t.input[0]) if t is not None else None
        if (t is None or t.op_type != "Transpose" or _perm(t) != [1, 0, 2] or not shape or len(shape) != 3
                or shape[0] != 1 or len(g.users(t.output[0])) != 1):
            continue
        # Y (the sequence output) would change its layout too: only when nothing reads it
        if node.output and node.output[0] and not _unread(g, node.output[0]):
            continue
        g.rename_input(t.output[0], t.input[0])
        g.remove(t)
        src = t.input[0]
        while src in g.producer and g.producer[src].op_type in ("QuantizeLinear", "DequantizeLinear"):
            src = g.producer[src].input[0]
        if src in {i.name for i in g.g.input}:
            # the user's [1, T, F] array is the firmware's sequence as it is (channel-last)
            notes.setdefault("input_layout", {})[src] = "nlc"
        for a in list(node.attribute):
            if a.name == "layout":
                node.attribute.remove(a)
        node.attribute.append(onnx.helper.make_attribute("layout", 1))
        notes.setdefault("rewrites", []).append(f"{node.op_type} {node.name or node.output[0]!r} reads the "
                                                "batch-first sequence (its input Transpose folded)")
        g.refresh()
        return True
    return False


def _unread(g, name):
    """Nothing reads `name` but Q/DQ nodes whose results nothing reads."""
    if name in g.outputs:
        return False
    return all(u.op_type in ("QuantizeLinear", "DequantizeLinear") and _unread(g, u.output[0]) for u in g.users(name))


def gather_of_one(g, notes):
    """A Gather of one index along an axis of size 1 (the last hidden state
    of a one-layer RNN, h_n[-1]) is a Squeeze of that axis: a view."""
    for node in g.nodes:
        if node.op_type != "Gather":
            continue
        idx = g.const(node.input[1]) if len(node.input) > 1 else None
        shape = g.shapes.get(node.input[0])
        axis = _attrs(node).get("axis", 0)
        if idx is None or np.asarray(idx).ndim != 0 or not shape or shape[axis % len(shape)] != 1:
            continue
        axes = g.add_init((node.name or "gather") + "_axes", np.asarray([axis % len(shape)], np.int64))
        squeeze = onnx.helper.make_node("Squeeze", [node.input[0], axes], list(node.output),
                                        name=(node.name or "gather") + "_squeeze")
        g.insert_before(node, squeeze)
        g.remove(node)
        notes.setdefault("rewrites", []).append(f"Gather {node.name or node.output[0]!r} of a size-1 axis is a "
                                                "Squeeze")
        g.refresh()
        return True
    return False


MOVES = ("Transpose", "Concat") + VIEWS


def quantize_before_movement(g, notes):
    """A per-tensor QuantizeLinear after float data movement (a detection
    head's Conv -> Transpose -> Reshape -> Concat of three heads -> Q, or
    Relu outputs concatenated before their Q) moves onto the movement's
    inputs: Q(move(x)) is move(Q(x)) exactly, as quantization is elementwise.
    Each movement then sits between a DequantizeLinear and a QuantizeLinear
    of the same parameters, as the parsers take data movement; an input
    quantized with other parameters is requantized first (requant_chains)."""
    for q in g.nodes:
        if q.op_type != "QuantizeLinear" or g.qparams(q) is None:
            continue
        mv = g.producer.get(q.input[0])
        if mv is None or mv.op_type not in MOVES or g.only_user(mv.output[0]) is not q:
            continue
        data = range(len(mv.input)) if mv.op_type == "Concat" else [0]
        p = g.qparams(q)
        changed = []
        for k in data:
            x = mv.input[k]
            prod = g.producer.get(x)
            if prod is not None and prod.op_type == "DequantizeLinear" and g.qparams(prod) is not None \
                    and _same_params(g.qparams(prod), p):
                continue
            if g.types.get(x) != onnx.TensorProto.FLOAT or g.const(x) is not None:
                continue
            if prod is None and x in {i.name for i in g.g.input}:
                continue    # a graph input's views before its first Q: the parsers' input_quantizers
            xq, xd = g.fresh(f"{x}_q"), g.fresh(f"{x}_dq")
            new_q = helper.make_node("QuantizeLinear", [x] + list(q.input[1:]), [xq], name=g.fresh(f"{x}_q"))
            new_dq = helper.make_node("DequantizeLinear", [xq] + list(q.input[1:]), [xd], name=g.fresh(f"{x}_dq"))
            g.insert_before(mv, new_q, new_dq)
            mv.input[k] = xd
            changed.append(x)
        if changed:
            g.refresh()
            notes.setdefault("rewrites", []).append(
                f"QuantizeLinear {q.name or q.output[0]!r} moved before {mv.op_type} {mv.name or mv.output[0]!r}")
            return True
    return False


def int8_split(g, notes):
    """Split on int8 values (tf2onnx: Q -> Split -> DQ per piece) becomes
    DQ -> Split -> Q -> DQ per piece, as QDQ writes it; pieces dequantized
    with other parameters than the source's would be reinterpreted: left as
    they are (the parser names the node)."""
    for node in list(g.nodes):
        if node.op_type != "Split" or not _is_int8(g, node.input[0]):
            continue
        dqs = [g.only_user(o) for o in node.output]
        if any(d is None or d.op_type != "DequantizeLinear" for d in dqs):
            continue
        p = g.qparams(dqs[0])
        prod = g.producer.get(node.input[0])
        if p is None or any(g.qparams(d) != p for d in dqs) or (
                prod is not None and prod.op_type == "QuantizeLinear" and not _same_params(g.qparams(prod), p)):
            continue
        src_f = g.fresh(node.input[0] + "_dq")
        new = [helper.make_node("DequantizeLinear", [node.input[0]] + list(dqs[0].input[1:]), [src_f],
                                name=g.fresh((node.name or "split") + "_dq"))]
        pieces = [g.fresh(o + "_float") for o in node.output]
        split = helper.make_node("Split", [src_f] + list(node.input[1:]), pieces, name=node.name)
        for a in node.attribute:
            split.attribute.append(a)
        new.append(split)
        for piece, out in zip(pieces, node.output):
            new.append(helper.make_node("QuantizeLinear", [piece] + list(dqs[0].input[1:]), [out],
                                        name=g.fresh(out + "_q")))
        g.insert_before(node, *new)
        g.remove(node)
        g.refresh()
        notes.setdefault("rewrites", []).append(f"Split {node.name or node.output[0]!r} on int8 made QDQ")
        return True
    return False


def quantize_after_movement(g, notes):
    """Float data movement after a DequantizeLinear that no QuantizeLinear of
    the same parameters follows (tf2onnx's channel shuffle: DQ -> Reshape ->
    Transpose -> Reshape -> Transpose -> Conv) gets one: Q(DQ(x)) is x for
    the values it moves, so each movement sits between a DQ and a Q, as the
    parsers take it. A flatten into a fully connected layer is left alone
    (its weights are permuted instead)."""
    for node in g.nodes:
        if node.op_type not in MOVES + ("Split",) or node.op_type == "Concat":
            continue
        prod = g.producer.get(node.input[0])
        if prod is None or prod.op_type != "DequantizeLinear" or g.qparams(prod) is None:
            continue
        if node.op_type in VIEWS and len(g.shapes.get(node.output[0]) or []) <= 2:
            continue
        p = g.qparams(prod)
        changed = False
        for out in node.output:
            users = g.users(out)
            if len(users) == 1 and users[0].op_type == "QuantizeLinear" and g.qparams(users[0]) is not None \
                    and _same_params(g.qparams(users[0]), p) and out not in g.outputs:
                continue
            q_out, dq_out = g.fresh(out + "_q"), g.fresh(out + "_dq")
            q = helper.make_node("QuantizeLinear", [out] + list(prod.input[1:]), [q_out], name=g.fresh(out + "_q"))
            dq = helper.make_node("DequantizeLinear", [q_out] + list(prod.input[1:]), [dq_out],
                                  name=g.fresh(out + "_dq"))
            for u in users:
                for k, x in enumerate(u.input):
                    if x == out:
                        u.input[k] = dq_out
            if out in g.outputs:
                continue
            i = next(k for k, n in enumerate(g.nodes) if n is node)
            g.nodes[i + 1:i + 1] = [q, dq]
            changed = True
        if changed:
            g.refresh()
            notes.setdefault("rewrites", []).append(
                f"{node.op_type} {node.name or node.output[0]!r} quantized with its input's parameters")
            return True
    return False


REWRITES = (recurrent_layouts, gather_of_one, fuse_hardswish, fold_input_transposes, fold_output_transposes, move_int8_ops_after_dq, int8_concat,
            int8_split, requant_chains, fold_pads, transposes_into_linear, quantize_before_movement,
            quantize_after_movement, mul_by_constant)   # last: after views have moved off int8 tensors


def bind_constants(model, path, constants):
    """Graph inputs that are parameters (ONNX's own QLinearConv test gives
    its scales and zero points as inputs, their values as test data) become
    initializers holding the values the model YAML's `constants:` names
    (ONNX TensorProto files). Returns the model."""
    if not constants:
        return model
    inputs = {vi.name: vi for vi in model.graph.input}
    inits = {i.name for i in model.graph.initializer}
    for name, file in sorted(constants.items()):
        if name not in inputs or name in inits:
            raise FrontendError(path, f"constants.{name}: the model has no graph input {name!r}",
                                f"its inputs: {', '.join(n for n in inputs if n not in inits)}")
        tensor = onnx.TensorProto()
        try:
            with open(file, "rb") as f:
                tensor.ParseFromString(f.read())
            value = numpy_helper.to_array(tensor)
        except Exception as err:
            raise FrontendError(file, f"not an ONNX TensorProto ({type(err).__name__})",
                                "give the .pb file of the input's value (ONNX test data)") from None
        tt = inputs[name].type.tensor_type
        want = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type) if tt.elem_type else value.dtype
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] if tt.HasField("shape") else None
        if value.dtype != want or (dims is not None and (len(dims) != value.ndim or any(
                d is not None and d != n for d, n in zip(dims, value.shape)))):
            raise FrontendError(file, f"a {value.dtype} {list(value.shape)} value for graph input {name!r} "
                                f"of {np.dtype(want).name} {dims}", "give the value of that input")
        model.graph.input.remove(inputs[name])
        model.graph.initializer.append(numpy_helper.from_array(value, name))
    return model


def for_ort_check(model, path, input_shape=None, constants=None):
    """The model ONNX Runtime runs for the check: its parameter inputs bound,
    its free dimensions pinned and its basic optimizations applied (ORT
    applies them to any model it loads, so the values are ORT's own; the
    tensor names are those the import starts from)."""
    bind_constants(model, path, constants)
    pin_inputs(model, path, input_shape)
    return ort_basic(infer(model, path), path)


def normalize(model, path, input_shape=None):
    """(canonical ModelProto, notes) for a QDQ/QOperator model."""
    notes = {}
    pinned = pin_inputs(model, path, input_shape)
    if pinned:
        notes["batch_pinned"] = pinned
    model = infer(model, path)
    model = ort_basic(model, path)
    model = infer(model, path)
    g = _Graph(model, path)
    cut_float_tail(g, notes)
    for _ in range(10000):
        model = g.sync()
        del model.graph.value_info[:]     # shapes change with the rewrites
        g = _Graph(infer(model, path), path)
        if not any(rewrite(g, notes) for rewrite in REWRITES):
            break
    _drop_dead(g)
    model = g.sync()
    del model.graph.value_info[:]
    return infer(model, path), notes
