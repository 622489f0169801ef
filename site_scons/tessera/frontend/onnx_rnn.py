"""ONNX LSTM and GRU nodes as ONNX Runtime's quantize_static leaves them
(QDQ: QuantizeLinear/DequantizeLinear around the sequence, the weights,
the recurrence weights, the bias and the initial state; the node itself in
float) to the parameters of the integer recurrent step
(golden.recurrent.onnx_cell): int8 weights with their zero points, the
multipliers of the fixed-point forms, the float32 biases (DequantizeLinear's
values, as ONNX Runtime adds them) in Q8.23.

    rnn, arrays = recurrent_params(node, quantized, y_scale, y_zero_point)

`quantized(name)` gives a DequantizeLinear input's (int array, scale, zero
point). Forward direction, batch 1, the default activations, no clip, no
peephole, no sequence lengths; anything else is a one-line error.
"""

import numpy as np

from ..errors import FrontendError
from .fixedpoint import quantize_multiplier

PRE_BITS = 23     # the gates' pre-activations in Q8.23
STATE_BITS = 15   # the hidden state in Q0.15


def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            import onnx

            return onnx.helper.get_attribute_value(a)
    return default


def recurrent_params(node, quantized, y_scale, y_zero_point, where=""):
    op = node.op_type
    if op not in ("LSTM", "GRU"):
        raise ValueError(op)
    gates = 4 if op == "LSTM" else 3
    direction = _attr(node, "direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction != "forward":
        raise FrontendError(where, f"a {direction} {op}", "tessera runs forward recurrences")
    if _attr(node, "clip") is not None or _attr(node, "activations") is not None:
        raise FrontendError(where, f"an {op} with clip or other activations", "export with the defaults")
    if op == "GRU" and _attr(node, "linear_before_reset", 0) != 1:
        raise FrontendError(where, "a GRU with linear_before_reset 0",
                            "tessera takes PyTorch's and Keras' (reset_after) GRU: linear_before_reset 1")
    ins = list(node.input) + [""] * 8
    if ins[4] or (op == "LSTM" and ins[7]):
        raise FrontendError(where, f"an {op} with sequence lengths or peepholes", "export without them")
    xq, s_x, z_x = None, *quantized(ins[0])[1:]
    w, s_w, z_w = quantized(ins[1])
    r, s_r, z_r = quantized(ins[2])
    if w.shape[0] != 1 or r.shape[0] != 1:
        raise FrontendError(where, f"a {w.shape[0]}-direction {op}", "one direction")
    H = int(_attr(node, "hidden_size", r.shape[-1]))
    w, r = w[0], r[0]
    if ins[3]:
        b, s_b, z_b = quantized(ins[3])
        real = (np.float32(s_b) * (b.reshape(-1).astype(np.float32) - np.float32(z_b))).astype(np.float64)
    else:
        real = np.zeros(2 * gates * H)
    fixed = np.rint(real * 2.0 ** PRE_BITS)
    if np.abs(fixed).max(initial=0) >= 2 ** 31:
        raise FrontendError(where, f"an {op} bias beyond the fixed point's range", "re-quantize the model")
    if ins[5]:
        h0, s_h, z_h = quantized(ins[5])
        if np.any(h0 != z_h):
            raise FrontendError(where, f"an {op} with a non-zero initial state", "start from zero")
    mul, shift = {}, {}
    for key, real_scale in (("x", float(s_x) * float(s_w) * 2.0 ** PRE_BITS),
                            ("h", float(s_r) * 2.0 ** (PRE_BITS - STATE_BITS)),
                            ("y", 2.0 ** -STATE_BITS / float(y_scale))):
        mul[key], shift[key] = (int(v) for v in quantize_multiplier(real_scale))
    rnn = {"cell": "onnx_lstm" if op == "LSTM" else "onnx_gru", "n_input": int(w.shape[1]), "n_cell": H,
           "n_output": H, "zp": {"x": int(z_x), "w": int(z_w), "r": int(z_r)}, "mul": mul, "shift": shift,
           "y_zp": int(y_zero_point)}
    arrays = {"w_input": w.astype(np.int8), "w_recurrent": r.astype(np.int8),
              # each input-weight row summed: the kernels take the zero points out of their sums
              "w_sums": w.astype(np.int64).sum(axis=1).astype(np.int32),
              "b_input": fixed[:gates * H].astype(np.int32), "b_recurrent": fixed[gates * H:].astype(np.int32)}
    return rnn, arrays


def import_node(parser, node):
    """An LSTM or GRU node of a QDQ graph (frontend.qdq's parser) onto one
    `lstm` layer: its input the quantized sequence (normalize made the node
    read it batch-first), its output the quantized last hidden state Y_h
    (the sequence Y unread)."""
    import onnx

    from ..ir import Layer

    g, b = parser.g, parser.b
    where = g.where(node)
    if dict((a.name, onnx.helper.get_attribute_value(a)) for a in node.attribute).get("layout", 0) != 1:
        raise FrontendError(where, f"an {node.op_type} read time-major",
                            "export it batch-first (batch_first=True) with batch 1")
    x = parser.activation(node.input[0], node)

    def quantized(name):
        prod = g.producer.get(name)
        if prod is None or prod.op_type != "DequantizeLinear":
            raise FrontendError(where, f"input {name!r} is not dequantized",
                                f"quantize the {node.op_type} (quantize_static's op_types_to_quantize)")
        parser.handled.add(id(prod))
        src, scale, zp, _ = parser._dq_params(prod)
        if scale.size != 1:
            raise FrontendError(where, "a per-channel quantized recurrent input", "quantize it per tensor")
        value = g.array(src) if g.is_const(src) else None
        if value is None and src in g.producer and g.producer[src].op_type == "QuantizeLinear":
            q = g.producer[src]            # a quantized constant (the zero initial state)
            parser.handled.add(id(q))
            if g.is_const(q.input[0]):
                s_q, z_q, _ = parser._q_params(q)
                value = np.clip(np.rint(np.asarray(g.array(q.input[0]), np.float64) / s_q) + z_q, -128, 127)
        return (None if value is None else np.asarray(value).astype(np.int64)), float(scale.reshape(-1)[0]), \
            int(np.asarray(zp).reshape(-1)[0])

    users = g.consumers.get(node.output[1], []) if len(node.output) > 1 else []
    if len(users) != 1 or users[0].op_type != "QuantizeLinear":
        raise FrontendError(where, f"the {node.op_type}'s last hidden state is not quantized",
                            "quantize the node's outputs")
    q_y = users[0]
    parser.handled.add(id(q_y))
    s_y, zp_y, dtype = parser._q_params(q_y)
    rnn, arrays = recurrent_params(node, quantized, s_y, zp_y, where)
    t = b.tensors[x]
    steps = t.size // rnn["n_input"]
    if steps * rnn["n_input"] != t.size:
        raise FrontendError(where, f"a sequence of {t.size} values for {rnn['n_input']} inputs a step")
    if x in b.inputs:
        # a batch-first sequence: time along W, features as channels, in the user's order
        t.shape, t.source_layout = [1, steps, rnn["n_input"]], "hwc"
    if t.shape != [1, steps, rnn["n_input"]]:
        raise FrontendError(where, f"reads a {t.shape} tensor as {steps} steps", "give it the graph's input sequence")
    rnn.update(steps=steps, sequence=False)
    y = b.tensor(q_y.output[0], [1, 1, rnn["n_cell"]], dtype, s_y, zp_y)
    layer = Layer(name=b.layer_name(node.name or node.op_type.lower()), op="lstm", inputs=[x], output=y, rnn=rnn,
                  source=[node.name or node.output[0]])
    b.recurrent(layer, arrays)
