"""Parameter and MAC counts of a float or QDQ ONNX model."""

import onnx
from onnx import numpy_helper, shape_inference


def _size(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def model_stats(model):
    """{"params": int, "macs": int} of a model (path or ModelProto).

    params: elements of every Conv/Gemm weight and bias (after batch-norm
    folding there is nothing else that holds parameters). In a QDQ graph the
    weight reaches the Conv through a DequantizeLinear; its quantized
    initializer is counted, not the scales and zero points.
    macs: multiply-accumulates of Conv (out elements * in-channels/group *
    kernel area) and Gemm (M * N * K); pools, adds and activations count
    nothing.
    """
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(model)
    model = shape_inference.infer_shapes(model)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    shapes = {}
    for vi in list(graph.value_info) + list(graph.input) + list(graph.output):
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = [d.dim_value for d in dims]

    def const_dims(name):
        """Dims of a constant input, looking through DequantizeLinear."""
        if name in inits:
            return list(inits[name].dims)
        node = producer.get(name)
        if node is not None and node.op_type == "DequantizeLinear":
            return const_dims(node.input[0])
        if node is not None and node.op_type == "Constant":
            return list(numpy_helper.to_array(node.attribute[0].t).shape)
        raise ValueError(f"{name} is not a constant")

    params = 0
    macs = 0
    for node in graph.node:
        if node.op_type not in ("Conv", "Gemm"):
            continue
        w = const_dims(node.input[1])
        params += _size(w)
        if len(node.input) > 2 and node.input[2]:
            params += _size(const_dims(node.input[2]))
        if node.op_type == "Conv":
            out = shapes[node.output[0]]
            # w is [out_channels, in_channels / group, kh, kw]
            macs += _size(out) * _size(w[1:])
        else:
            out = shapes[node.output[0]]
            # Gemm: each output element is a dot product over K; the weight
            # holds K * N elements and N is the output's last dim.
            k = _size(w) // out[-1]
            macs += _size(out) * k
    return {"params": int(params), "macs": int(macs)}
