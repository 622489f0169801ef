"""Elementwise islands of QDQ graphs: a chain of float ops between one int8
tensor and a later QuantizeLinear that computes, value by value, a function
of that tensor alone (PyTorch's GELU: x / sqrt(2) -> Erf -> + 1 -> * x ->
* 0.5, every step quantized by quantize_static; its tanh form with Pow).
Whatever the chain, its output is an int8 -> int8 function: a 256-entry
table, computed here by evaluating the chain's own ops on every int8 input
as ONNX Runtime does (float32 values, QuantizeLinear rounding half to even
and saturating), so the layer is the chain.

An island grows around a trigger op tessera has no layer for (Erf, Pow,
and Tanh when it is not alone between a DQ and a Q), back to the one int8
tensor it depends on (its root) and forward while each next op reads only
values computed from that root (or constants); it ends at the last
QuantizeLinear of that walk, whose readers are layers again.

The graph is normalize's _Graph: `nodes`, `producer` (tensor -> node),
`consumers` (tensor -> nodes), `const` (an initializer's or Constant's
value) and `const_value` (also through DequantizeLinear(QuantizeLinear(
constant))), None when not a constant.
"""

import math

import numpy as np

ELEMENTWISE = ("Add", "Sub", "Mul", "Div", "Erf", "Tanh", "Pow", "Sqrt", "Sigmoid", "Neg", "Relu", "Abs")
TRIGGERS = ("Erf", "Pow", "Tanh")


class Island:
    def __init__(self, root, exit_, nodes, trigger):
        self.root, self.exit, self.nodes, self.trigger = root, exit_, nodes, trigger


def _roots(g, name, seen=None):
    """The int8 tensors `name` is computed from through elementwise ops and
    Q/DQ pairs (outputs of a QuantizeLinear of a non-elementwise op, or
    graph inputs); None when something else feeds it."""
    seen = {} if seen is None else seen
    if name in seen:
        return seen[name]
    c = g.const_value(name)
    if c is not None:
        # a scalar: the same for every value (a per-channel constant, a
        # bias, would make a table per channel; it is a layer of its own)
        seen[name] = set() if np.asarray(c).size == 1 else None
        return seen[name]
    p = g.producer.get(name)
    if p is None:
        out = {name}
    elif p.op_type == "DequantizeLinear":
        out = _roots(g, p.input[0], seen)
    elif p.op_type == "QuantizeLinear":
        src = g.producer.get(p.input[0])
        out = _roots(g, p.input[0], seen) if src is not None and src.op_type in ELEMENTWISE else None
        out = {name} if out is None else out   # the int8 output of a layer
    elif p.op_type in ELEMENTWISE:
        out = set()
        for i in p.input:
            r = _roots(g, i, seen) if i else set()
            if r is None:
                out = None
                break
            out |= r
    else:
        out = None
    seen[name] = out
    return out


def _single_root(g, name):
    r = _roots(g, name)
    return next(iter(r)) if r is not None and len(r) == 1 else None


def find(g, trigger):
    """The island around a trigger node, or None."""
    if trigger.op_type not in TRIGGERS:
        return None
    root = _single_root(g, trigger.output[0])
    if root is None:
        return None
    t, exit_ = trigger.output[0], None
    while True:
        users = g.consumers.get(t, [])
        if len(users) != 1:
            break
        u = users[0]
        if u.op_type == "QuantizeLinear":
            exit_ = u.output[0]
            dqs = g.consumers.get(exit_, [])
            nxt = [w for d in dqs if d.op_type == "DequantizeLinear" for w in g.consumers.get(d.output[0], [])]
            if (len(dqs) == 1 and dqs[0].op_type == "DequantizeLinear" and len(nxt) == 1
                    and nxt[0].op_type in ELEMENTWISE and _single_root(g, nxt[0].output[0]) == root):
                t = nxt[0].output[0]
                continue
            break
        if u.op_type in ELEMENTWISE and _single_root(g, u.output[0]) == root:
            t = u.output[0]
            continue
        break
    if exit_ is None:
        return None
    # every node between the root and the exit
    nodes, todo = {}, [exit_]
    while todo:
        name = todo.pop()
        p = g.producer.get(name)
        if p is None or name == root or id(p) in nodes or g.const_value(name) is not None:
            continue
        nodes[id(p)] = p
        todo.extend(i for i in p.input if i)
    return Island(root, exit_, list(nodes.values()), trigger)


def _quantize(v, scale, zp, dtype):
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    return np.clip(np.rint(v / np.float32(scale)).astype(np.float64) + zp, lo, hi)


def _q_params(g, node):
    scale = float(np.asarray(g.const_value(node.input[1])).reshape(-1)[0])
    zp_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
    zp_arr = g.const(zp_name) if zp_name else np.zeros((), np.uint8 if node.op_type == "QuantizeLinear"
                                                           else np.int8)
    return scale, int(np.asarray(zp_arr).reshape(-1)[0]), str(np.asarray(zp_arr).dtype)


_OPS = {
    "Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
    "Div": lambda a, b: a / b, "Pow": lambda a, b: np.power(a, b),
    "Erf": lambda a: np.vectorize(math.erf)(a.astype(np.float64)),
    "Tanh": np.tanh, "Sqrt": np.sqrt, "Neg": lambda a: -a, "Abs": np.abs,
    "Sigmoid": lambda a: 1.0 / (1.0 + np.exp(-a.astype(np.float64))),
    "Relu": lambda a: np.maximum(a, 0),
}


def table(g, island, x_shift, out_shift):
    """The 256 stored int8 outputs of the island, one per stored input
    (stored = source - shift, uint8 stored shifted by 128)."""
    order = {id(n): i for i, n in enumerate(g.nodes)}
    values = {island.root: np.arange(-128, 128, dtype=np.float64) + x_shift}
    for node in sorted(island.nodes, key=lambda n: order[id(n)]):
        args = []
        for i in node.input[:1] if node.op_type in ("QuantizeLinear", "DequantizeLinear") else node.input:
            if i in values:
                args.append(values[i])
            else:
                args.append(np.asarray(g.const_value(i), np.float32))
        if node.op_type == "DequantizeLinear":
            scale, zp, _ = _q_params(g, node)
            out = ((args[0] - zp).astype(np.float32) * np.float32(scale)).astype(np.float32)
        elif node.op_type == "QuantizeLinear":
            out = _quantize(args[0], *_q_params(g, node))
        else:
            out = np.asarray(_OPS[node.op_type](*[np.asarray(a, np.float32) for a in args]), np.float32)
        values[node.output[0]] = out
    return (values[island.exit] - out_shift).astype(np.int64)


def members(g):
    """id() of every node in some island of the graph."""
    out = set()
    for node in g.nodes:
        island = find(g, node)
        if island is not None:
            out.update(id(n) for n in island.nodes)
    return out
