"""The operators of real exports (issue 10) in QDQ graphs quantized by ONNX
Runtime: each lowers to the IR op it should, and every layer of the golden
model is within 1 LSB of ONNX Runtime (each layer fed ORT's own input)."""

import numpy as np
import pytest

from opgraphs import KINDS, build, quantize
from tessera.frontend import import_onnx
from tessera.golden import random_input
from tessera.golden.ortcheck import compare

# the IR ops each graph must produce (checks the lowering, not only the numbers)
EXPECT = {"dilated": {"conv2d", "depthwise"}, "tcn1d": {"conv2d", "depthwise", "maxpool", "avgpool"},
          "se": {"lut", "avgpool", "mul", "add"}, "se_sigmoid": {"lut", "avgpool", "mul"},
          "swish": {"lut", "mul"}, "resize_nearest": {"resize", "concat"},
          "resize_bilinear": {"resize", "concat"}, "resize_align": {"resize", "concat"},
          "softmax": {"linear", "softmax"}, "pools": {"maxpool", "avgpool", "concat"},
          "Clip": {"conv2d", "pointwise"},   # folded into the convolutions' clamps
          "mbv3": {"lut", "mul", "resize", "concat", "depthwise", "add"}}


@pytest.mark.parametrize("activation", ["int8", "uint8"])
@pytest.mark.parametrize("kind", KINDS)
def test_golden_within_one_lsb_of_onnx_runtime(tmp_path, kind, activation):
    path = quantize(build(kind), tmp_path / f"{kind}.onnx", activation=activation)
    graph, weights = import_onnx(path, kind)
    ops = {layer.op for layer in graph.layers}
    assert EXPECT.get(kind, {"lut"}) <= ops, ops
    if kind in ("dilated", "tcn1d", "mbv3"):
        assert any(layer.dilation for layer in graph.layers)
    for seed in (1, 2):
        rows = compare(path, graph, weights, random_input(graph, seed))
        worst = max(rows, key=lambda r: r["max_diff"])
        assert worst["max_diff"] <= 1, rows


# ONNX Runtime's QOperator form (QLinearMul, QLinearConcat, QLinearSigmoid,
# QLinearLeakyRelu, QLinearSoftmax, Resize on the quantized tensor), with the
# ops that have no QLinear form left in float between DQ and Q
QOPERATOR = {"dilated": "lut", "se_sigmoid": "mul", "resize_bilinear": "resize", "resize_nearest": "concat",
             "Sigmoid": "lut", "LeakyRelu": "lut", "PRelu": "lut", "softmax": "softmax", "pools": "maxpool"}


@pytest.mark.parametrize("kind", sorted(QOPERATOR))
def test_qoperator_golden_within_one_lsb_of_onnx_runtime(tmp_path, kind):
    import onnx

    path = quantize(build(kind), tmp_path / f"{kind}.onnx", fmt="qoperator")
    assert any(n.op_type.startswith("QLinear") for n in onnx.load(path).graph.node)
    graph, weights = import_onnx(path, kind)
    assert graph.dialect == "qoperator" and QOPERATOR[kind] in {layer.op for layer in graph.layers}
    rows = compare(path, graph, weights, random_input(graph, 1))
    assert max(r["max_diff"] for r in rows) <= 1, rows


@pytest.mark.parametrize("kind", ["dilated", "tcn1d", "mbv3"])
def test_per_tensor_weights_within_one_lsb_of_onnx_runtime(tmp_path, kind):
    path = quantize(build(kind), tmp_path / f"{kind}.onnx", per_channel=False)
    graph, weights = import_onnx(path, kind)
    convs = [layer for layer in graph.layers if layer.weights]
    # one weight scale: every channel of a layer requantizes alike
    assert convs and all(len(set(zip(layer.requant.mul, layer.requant.shift))) == 1 for layer in convs)
    rows = compare(path, graph, weights, random_input(graph, 1))
    assert max(r["max_diff"] for r in rows) <= 1, rows
