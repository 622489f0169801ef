"""Small float ONNX graphs for the operators of real exports (issue 10),
quantized by ONNX Runtime's quantize_static: shared by the golden-vs-ORT
tests and the firmware builds."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import helpers


def _w(rng, *shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def model(nodes, inits, in_shape, out_shape, opset=14):
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def quantize(m, path, activation="int8", per_channel=True, seed=0, samples=8, fmt="qdq"):
    """ORT's quantize_static (QDQ, or QOperator), every op type of the graph quantized."""
    # keep Relu/Clip as nodes (ORT folds them into the Q ranges by default) where the graph is about them
    extra = {"QDQKeepRemovableActivations": True} if m.graph.name == "keep_activations" else {}
    return helpers.quantize(m, path, fmt=fmt, activation=activation, seed=seed, samples=samples,
                            per_channel=per_channel, input_scale=2.0, every_op=True, extra_options=extra)


def conv(rng, inits, name, x, ci, co, k, group=1, dil=None, pad=None, stride=None, dims=2):
    inits[name + "_w"] = _w(rng, co, ci // group, *([k] * dims))
    inits[name + "_b"] = _w(rng, co, scale=0.1)
    a = {"group": group, "kernel_shape": [k] * dims}
    if dil:
        a["dilations"] = [dil] * dims
    if pad is not None:
        a["pads"] = [pad] * (2 * dims)
    if stride:
        a["strides"] = [stride] * dims
    return helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], name=name, **a)


def build(kind, seed=0):
    """(float model) of one small test graph."""
    rng = np.random.default_rng(seed)
    I = {}
    N = helper.make_node
    if kind == "dilated":           # 2D dilated conv and depthwise (ASPP-like), a table between
        nodes = [conv(rng, I, "c1", "input", 4, 8, 3, dil=2, pad=2),
                 N("Relu", ["c1"], ["r1"]),
                 conv(rng, I, "c2", "r1", 8, 8, 3, group=8, dil=3, pad=3),
                 N("HardSwish", ["c2"], ["h2"]),
                 conv(rng, I, "c3", "h2", 8, 6, 3, dil=2, pad=1, stride=2)]
        nodes[-1].output[0] = "output"
        return model(nodes, I, [1, 4, 14, 14], [1, 6, 6, 6])
    if kind == "tcn1d":             # 1D dilated causal-ish stack
        nodes = [conv(rng, I, "c1", "input", 4, 8, 3, dil=1, pad=1, dims=1),
                 conv(rng, I, "c2", "c1", 8, 8, 3, dil=2, pad=2, dims=1),
                 conv(rng, I, "c3", "c2", 8, 8, 3, group=8, dil=4, pad=4, dims=1),
                 N("MaxPool", ["c3"], ["p"], kernel_shape=[2], strides=[2]),
                 N("AveragePool", ["p"], ["output"], kernel_shape=[2], strides=[2])]
        return model(nodes, I, [1, 4, 32], [1, 8, 8])
    if kind == "se":                # squeeze-and-excitation: ReduceMean, HardSigmoid, broadcast Mul
        nodes = [conv(rng, I, "c1", "input", 4, 8, 3, pad=1),
                 N("HardSwish", ["c1"], ["h1"]),
                 N("ReduceMean", ["h1"], ["m"], axes=[2, 3], keepdims=1),
                 conv(rng, I, "fc1", "m", 8, 4, 1),
                 N("Relu", ["fc1"], ["r"]),
                 conv(rng, I, "fc2", "r", 4, 8, 1),
                 N("HardSigmoid", ["fc2"], ["s"], alpha=1.0 / 6, beta=0.5),
                 N("Mul", ["h1", "s"], ["x2"]),
                 N("Add", ["x2", "c1"], ["output"])]
        return model(nodes, I, [1, 4, 8, 8], [1, 8, 8, 8])
    if kind == "se_sigmoid":        # squeeze-and-excitation with ops that all have a QLinear form
        nodes = [conv(rng, I, "c1", "input", 4, 8, 3, pad=1),
                 N("Relu", ["c1"], ["r1"]),
                 N("GlobalAveragePool", ["r1"], ["m"]),
                 conv(rng, I, "fc1", "m", 8, 4, 1),
                 N("Relu", ["fc1"], ["r"]),
                 conv(rng, I, "fc2", "r", 4, 8, 1),
                 N("Sigmoid", ["fc2"], ["s"]),
                 N("Mul", ["s", "r1"], ["output"])]     # the vector first: the lowering reorders
        return model(nodes, I, [1, 4, 16, 16], [1, 8, 16, 16])
    if kind == "swish":             # x * sigmoid(x): a same-shape mul, tiled like add
        nodes = [conv(rng, I, "c1", "input", 4, 8, 3, pad=1),
                 N("Sigmoid", ["c1"], ["s"]),
                 N("Mul", ["c1", "s"], ["m"]),
                 conv(rng, I, "c2", "m", 8, 8, 1)]
        nodes[-1].output[0] = "output"
        return model(nodes, I, [1, 4, 16, 16], [1, 8, 16, 16])
    if kind == "clamped":           # Relu/Clip right after resize, concat and a mean: folded clamps
        I["roi"] = np.zeros(0, np.float32)
        I["scales"] = np.array([1, 1, 2, 2], np.float32)
        I["lo"] = np.array(-0.5, np.float32)
        I["hi"] = np.array(0.8, np.float32)
        nodes = [conv(rng, I, "c1", "input", 4, 6, 3, pad=1, stride=2),
                 N("Resize", ["c1", "roi", "scales"], ["up"], mode="linear"),
                 N("Relu", ["up"], ["upr"]),
                 conv(rng, I, "c2", "input", 4, 5, 1),
                 N("Concat", ["upr", "c2"], ["cat"], axis=1),
                 N("Clip", ["cat", "lo", "hi"], ["catc"]),
                 N("ReduceMean", ["catc"], ["m"], axes=[2, 3], keepdims=1),
                 N("Relu", ["m"], ["output"])]
        m = model(nodes, I, [1, 4, 8, 8], [1, 11, 1, 1])
        m.graph.name = "keep_activations"
        return m
    if kind == "resize_sizes":      # `sizes` to an odd shape: scales are the size ratios
        I["roi"] = np.zeros(0, np.float32)
        I["scales"] = np.zeros(0, np.float32)
        I["sizes"] = np.array([1, 6, 7, 5], np.int64)
        nodes = [conv(rng, I, "c1", "input", 4, 6, 3, pad=1),
                 N("Resize", ["c1", "roi", "scales", "sizes"], ["up"], mode="linear",
                   coordinate_transformation_mode="pytorch_half_pixel"),
                 N("Resize", ["up", "roi", "scales", "sizes2"], ["output"], mode="nearest",
                   coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil")]
        I["sizes2"] = np.array([1, 6, 3, 11], np.int64)
        return model(nodes, I, [1, 4, 4, 4], [1, 6, 3, 11])
    if kind == "mul_spatial":       # a spatial attention map [H, W, 1] times the features: whole tensors
        nodes = [conv(rng, I, "f", "input", 3, 8, 3, pad=1),
                 conv(rng, I, "att", "input", 3, 1, 1),
                 N("Sigmoid", ["att"], ["s"]),
                 N("Mul", ["f", "s"], ["output"])]
        return model(nodes, I, [1, 3, 16, 16], [1, 8, 16, 16])
    if kind == "seg":               # a tiny segmentation head: upsample, skip concat, per-pixel softmax
        I["roi"] = np.zeros(0, np.float32)
        I["scales"] = np.array([1, 1, 2, 2], np.float32)
        nodes = [conv(rng, I, "enc", "input", 3, 8, 3, pad=1, stride=2),
                 N("Relu", ["enc"], ["encr"]),
                 N("Resize", ["encr", "roi", "scales"], ["up"], mode="linear"),
                 conv(rng, I, "skip", "input", 3, 4, 1),
                 N("Concat", ["up", "skip"], ["cat"], axis=1),
                 conv(rng, I, "cls", "cat", 12, 5, 1),
                 N("Softmax", ["cls"], ["output"], axis=1)]
        return model(nodes, I, [1, 3, 16, 16], [1, 5, 16, 16])
    if kind in ("resize_nearest", "resize_bilinear", "resize_align"):
        mode = "nearest" if kind == "resize_nearest" else "linear"
        coord = "align_corners" if kind == "resize_align" else ("asymmetric" if mode == "nearest" else "half_pixel")
        I["roi"] = np.zeros(0, np.float32)
        I["scales"] = np.array([1, 1, 2, 2], np.float32)
        nodes = [conv(rng, I, "c1", "input", 4, 6, 3, pad=1, stride=2),
                 N("Resize", ["c1", "roi", "scales"], ["up"], mode=mode, coordinate_transformation_mode=coord),
                 conv(rng, I, "c2", "input", 4, 5, 1),
                 N("Concat", ["up", "c2"], ["output"], axis=1)]
        return model(nodes, I, [1, 4, 8, 8], [1, 11, 8, 8])
    if kind in ("Sigmoid", "Tanh", "HardSwish", "LeakyRelu", "HardSigmoid", "PRelu", "Clip", "Elu"):
        act = {"LeakyRelu": {"alpha": 0.1}, "Elu": {"alpha": 0.8}}.get(kind, {})
        ins = ["c1"]
        if kind == "PRelu":
            I["slope"] = (rng.random((6, 1, 1)) * 0.5).astype(np.float32)
            ins.append("slope")
        if kind == "Clip":
            I["lo"] = np.array(-0.7, np.float32)
            I["hi"] = np.array(1.3, np.float32)
            ins += ["lo", "hi"]
        nodes = [conv(rng, I, "c1", "input", 3, 6, 3, pad=1),
                 N(kind, ins, ["a"], **act),
                 conv(rng, I, "c2", "a", 6, 4, 1),
                 N(kind if kind != "PRelu" else "LeakyRelu", ["c2"] + (ins[1:] if kind == "Clip" else []),
                   ["output"], **act)]
        return model(nodes, I, [1, 3, 6, 6], [1, 4, 6, 6])
    if kind == "softmax":
        I["fc_w"] = _w(rng, 32, 10)
        I["fc_b"] = _w(rng, 10, scale=0.1)
        nodes = [N("Gemm", ["input", "fc_w", "fc_b"], ["fc"]),
                 N("Softmax", ["fc"], ["output"], axis=-1)]
        return model(nodes, I, [1, 32], [1, 10])
    if kind == "pools":             # GlobalMaxPool, GlobalAveragePool, Concat of [1, C] vectors
        nodes = [conv(rng, I, "c1", "input", 3, 8, 3, pad=1),
                 N("GlobalMaxPool", ["c1"], ["gm"]),
                 N("GlobalAveragePool", ["c1"], ["ga"]),
                 N("Concat", ["gm", "ga"], ["output"], axis=1)]
        return model(nodes, I, [1, 3, 6, 6], [1, 16, 1, 1])
    if kind == "mbv3":              # a tiny MobileNetV3-like block: everything together
        I["roi"] = np.zeros(0, np.float32)
        I["scales"] = np.array([1, 1, 2, 2], np.float32)
        nodes = [conv(rng, I, "stem", "input", 3, 8, 3, pad=1, stride=2),
                 N("HardSwish", ["stem"], ["h0"]),
                 conv(rng, I, "dw", "h0", 8, 8, 3, group=8, dil=2, pad=2),
                 N("HardSwish", ["dw"], ["h1"]),
                 N("GlobalAveragePool", ["h1"], ["sq"]),
                 conv(rng, I, "se1", "sq", 8, 4, 1),
                 N("Relu", ["se1"], ["ser"]),
                 conv(rng, I, "se2", "ser", 4, 8, 1),
                 N("HardSigmoid", ["se2"], ["sea"], alpha=1.0 / 6, beta=0.5),
                 N("Mul", ["h1", "sea"], ["x"]),
                 conv(rng, I, "pw", "x", 8, 8, 1),
                 N("Add", ["pw", "h0"], ["res"]),
                 N("Resize", ["res", "roi", "scales"], ["up"], mode="linear"),
                 conv(rng, I, "skip", "input", 3, 4, 1),
                 N("Concat", ["up", "skip"], ["cat"], axis=1),
                 conv(rng, I, "head", "cat", 12, 6, 3, pad=1, stride=4),
                 N("Sigmoid", ["head"], ["output"])]
        return model(nodes, I, [1, 3, 16, 16], [1, 6, 4, 4])
    raise KeyError(kind)


KINDS = ("dilated", "tcn1d", "se", "se_sigmoid", "swish", "clamped", "resize_sizes", "seg", "mul_spatial", "resize_nearest", "resize_bilinear", "resize_align", "Sigmoid", "Tanh",
         "HardSwish", "LeakyRelu", "HardSigmoid", "PRelu", "Clip", "Elu", "softmax", "pools", "mbv3")
