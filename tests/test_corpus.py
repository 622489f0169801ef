"""The corpus of real exports (tests/corpus/, made by tools/corpus/ with
tf2onnx and PyTorch + ONNX Runtime's quantize_static): every layer within
1 LSB of ONNX Runtime, the firmware bit-exact on the host and under QEMU;
and what normalization tells the user (pinned batch, float tails, input
layouts), with the one-line errors of what it cannot take."""

import json
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import ROOT, one_error, report, scons
from tessera import golden
from tessera.errors import FrontendError
from tessera.frontend import import_onnx
from tessera.frontend.normalize import for_ort_check
from tessera.golden.ortcheck import compare

CORPUS = os.path.join(ROOT, "tests", "corpus")
YAMLS = sorted(f[:-5] for f in os.listdir(CORPUS) if f.endswith(".yaml"))
MODELS = [n for n in YAMLS if os.path.exists(os.path.join(CORPUS, n + ".onnx"))]
TFLITE = [n for n in YAMLS if os.path.exists(os.path.join(CORPUS, n + ".tflite"))]

# what each converter's graph form makes normalization do (from the
# generators in tools/corpus/, not from tessera's output)
EXPECTED = {
    "tflite_kws_ds_cnn": {"input_layout": "nhwc", "float_tail": None, "batch_pinned": False},
    "tflite_keras_permute": {"input_layout": None, "float_tail": None, "batch_pinned": False},
    "tflite_float_io_image": {"input_layout": "nhwc", "float_tail": None, "batch_pinned": False},
    "torch_audio1d_softmax": {"input_layout": None, "float_tail": ["Softmax"], "batch_pinned": True},
    "torch_vision2d_sigmoid": {"input_layout": None, "float_tail": ["Sigmoid"], "batch_pinned": True},
    "torch_mbv3_small_se": {"input_layout": None, "float_tail": ["Softmax"], "batch_pinned": True},
    "torch_tcn_dilated": {"input_layout": None, "float_tail": None, "batch_pinned": True},
    "torch_segnet_resize_concat": {"input_layout": None, "float_tail": ["Sigmoid"], "batch_pinned": True},
    "tflite_seg_se_hardswish": {"input_layout": "nhwc", "float_tail": None, "batch_pinned": False},
    "torch_vision2d_qop_uint8": {"input_layout": None, "float_tail": ["Sigmoid"], "batch_pinned": True},
    "torch_kws_transformer": {"input_layout": None, "float_tail": None, "batch_pinned": False},
    "torch_vit_tiny": {"input_layout": None, "float_tail": None, "batch_pinned": False},
    "torch_kws_gru": {"input_layout": "nlc", "float_tail": ["Softmax"], "batch_pinned": True},
    "torch_kws_lstm": {"input_layout": "nlc", "float_tail": ["Softmax"], "batch_pinned": True},
    "tf2onnx_uint8_detector": {"input_layout": "nhwc", "float_tail": None, "batch_pinned": False},
    "torch_detect_heads": {"input_layout": None, "float_tail": None, "batch_pinned": True},
}
# the TFLite files (tools/corpus/make_tflite_files.py): what each converter's form needs
TFLITE_EXPECTED = {
    "tflite_uint8_detector": {"input": "uint8", "ops": {"gather", "resize", "lut", "concat"}},
    "tflite_kws_flat": {"input": "int8", "ops": {"argmax", "avgpool", "linear"}},   # its TRANSPOSE folds into the weights
    "tflite_tf1_uint8_qat": {"input": "uint8", "ops": {"softmax"}, "weight_offset": True},
}
# two encoder blocks of attention (four projections each) take more room
TRANSFORMERS = ("torch_kws_transformer", "torch_vit_tiny")


def corpus_path(name):
    return os.path.join(CORPUS, name + ".onnx")


def test_every_corpus_model_is_small_and_listed():
    assert set(MODELS) == set(EXPECTED) and set(TFLITE) == set(TFLITE_EXPECTED)
    assert set(MODELS) | set(TFLITE) == set(YAMLS)
    for name in MODELS:
        assert os.path.getsize(corpus_path(name)) < (200_000 if name in TRANSFORMERS else 100_000)
    for name in TFLITE:
        assert os.path.getsize(os.path.join(CORPUS, name + ".tflite")) < 100_000


@pytest.mark.parametrize("name", TFLITE)
def test_tflite_corpus_equals_the_interpreter(name):
    """Every tensor equal to the TFLite interpreter's, on the forms each
    converter writes (uint8 input and output, TF1 uint8 with weight
    offsets, views and data movement, ARG_MAX)."""
    from tessera.frontend.tflite import import_tflite
    from tessera.golden import tflitecheck
    path = os.path.join(CORPUS, name + ".tflite")
    graph, weights = import_tflite(path, name)
    inputs = golden.random_input(graph, 0)
    result = tflitecheck.compare(path, graph, weights and golden.run(graph, weights, inputs), inputs)
    assert result["equal"] and result["tensors"] > 3
    want = TFLITE_EXPECTED[name]
    assert graph.tensor(graph.inputs[0]).source_dtype == want["input"]
    assert want["ops"] <= {layer.op for layer in graph.layers}
    assert any(layer.weight_offset for layer in graph.layers) == want.get("weight_offset", False)


@pytest.mark.parametrize("name", TFLITE)
def test_tflite_corpus_is_bit_exact_on_host(tmp_path, name):
    out = tmp_path / "out"
    scons("target=host", f"model={os.path.join(CORPUS, name + '.yaml')}", out=out, check=True)
    rep = report(out, "host", name)
    assert rep["verdict"] == "pass" and rep["tflite"]["every_tensor_equal"] is True


@pytest.mark.parametrize("name", MODELS)
def test_corpus_layers_agree_with_onnx_runtime(name):
    path = corpus_path(name)
    graph, weights = import_onnx(path, name)
    inputs = golden.random_input(graph, 0)
    rows = compare(for_ort_check(onnx.load(path), path), graph, weights, inputs)
    # every layer's output is a tensor of the source graph: each one is compared; but a layer
    # that only moves values, or requantizes a detection head's piece before their concat, may
    # write a tensor of normalization's own (where it quantized data movement), and a copy
    # tessera adds (ViT's feature map regridded as tokens) has none
    from tessera.ir import MOVEMENT_OPS
    compared = {r["layer"] for r in rows}
    own = [layer for layer in graph.layers if layer.name not in compared]
    assert all(layer.added or layer.op in MOVEMENT_OPS or (layer.op == "avgpool" and layer.kernel == [1, 1])
               for layer in own)
    assert len(own) <= len(graph.layers) // 3
    assert max(r["max_diff"] for r in rows) <= 1, rows
    out = golden.run(graph, weights, inputs)[graph.outputs[0]]
    assert out.max() > out.min()
    notes = graph.notes or {}
    want = EXPECTED[name]
    assert (list(notes.get("input_layout", {}).values()) or [None])[0] == want["input_layout"]
    assert ([t["op"] for t in notes.get("float_tail", [])] or None) == want["float_tail"]
    assert bool(notes.get("batch_pinned")) == want["batch_pinned"]


@pytest.mark.parametrize("name", MODELS)
def test_corpus_model_is_bit_exact_on_host(tmp_path, name):
    out = tmp_path / "out"
    res = scons("target=host", f"model={os.path.join(CORPUS, name + '.yaml')}", out=out, check=True)
    rep = report(out, "host", name)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    # the ONNX Runtime check ran in the build's own preparation, on every
    # layer whose output ORT computes too (not the requantizations and data
    # movement that normalization or the lowering made)
    path = corpus_path(name)
    produced = {o for n in for_ort_check(onnx.load(path), path).graph.node for o in n.output}
    graph = json.loads((out / "host" / name / "graph.json").read_text())
    checked = [layer["name"] for layer in graph["layers"] if layer["output"] in produced]
    assert checked and [r["layer"] for r in rep["ort_check"]["layers"]] == checked
    assert rep["ort_check"]["worst"]["max_diff"] <= 1
    tail = EXPECTED[name]["float_tail"]
    header = (out / "host" / name / "src" / "network.h").read_text()
    if tail:
        line = next(l for l in res.stdout.splitlines() if "left to the application" in l)
        assert tail[0] in line and "zero point" in line
        assert rep["intake"]["float_tail"][0]["op"] == tail[0]
        o = rep["intake"]["output"]
        assert f"{name.upper()}_OUTPUT0_ZERO_POINT {o['zero_point']}" in header
        assert f"{tail[0]} (" in header
    else:
        assert "left to the application" not in res.stdout and "float tail" not in header
    if EXPECTED[name]["batch_pinned"]:
        assert "batch pinned to 1" in res.stdout


def needs(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")


@pytest.mark.qemu
@pytest.mark.parametrize("target, name", [("stm32h7", "tflite_kws_ds_cnn"), ("stm32h7", "torch_vision2d_sigmoid"),
                                          ("stm32h7", "torch_mbv3_small_se"), ("stm32h7", "tflite_seg_se_hardswish"),
                                          ("gap8", "tflite_keras_permute"), ("gap8", "torch_audio1d_softmax"),
                                          ("gap8", "torch_tcn_dilated"), ("gap8", "torch_segnet_resize_concat"),
                                          ("stm32h7", "torch_tcn_dilated"),
                                          ("stm32h7", "tflite_uint8_detector"), ("stm32h7", "tflite_tf1_uint8_qat"),
                                          ("stm32h7", "torch_detect_heads"), ("gap8", "tflite_kws_flat"),
                                          ("gap8", "tf2onnx_uint8_detector"), ("gap8", "tflite_uint8_detector"),
                                          ("gap8", "tflite_tf1_uint8_qat"),
                                          ("stm32h7", "torch_kws_transformer"), ("gap8", "torch_vit_tiny")])
def test_corpus_model_is_bit_exact_under_qemu(tmp_path, target, name):
    needs("arm-none-eabi-gcc", "qemu-system-arm") if target == "stm32h7" else \
        needs("riscv64-unknown-elf-gcc", "qemu-system-riscv32")
    out = tmp_path / "out"
    scons(f"target={target}", f"model={os.path.join(CORPUS, name + '.yaml')}", out=out, check=True)
    rep = report(out, target, name)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    if target == "stm32h7":
        # table activations (sigmoid, hard swish, a table per channel),
        # squeeze-and-excitation products, concatenations and resizes on the
        # library's kernels
        ops = [(layer["op"], layer["kernel"]) for layer in rep["layers"]
               if layer["op"] in ("lut", "mul", "concat", "resize")]
        assert all(k == "tsr_cmsis_" + op for op, k in ops), ops
        # dilated convolutions (the TCN's 1D, the segmentation net's 2D) on dilated.c
        dilated = [layer["kernel"] for layer in rep["layers"] if layer["kernel"] == "tsr_cmsis_conv2d_dilated"]
        assert len(dilated) == {"torch_tcn_dilated": 2, "tflite_seg_se_hardswish": 1}.get(name, 0), dilated
    if (target, name) == ("stm32h7", "tflite_tf1_uint8_qat"):
        # uint8 weights (a weight offset) on the library's DSP kernels, not the reference ones
        convs = [layer["kernel"] for layer in rep["layers"] if layer["op"] in ("conv2d", "pointwise", "depthwise")]
        assert convs and all(k.startswith("tsr_cmsis_") for k in convs), convs


# ---- what normalization cannot take, and the YAML's answers ------------------

def _with_free_length(tmp_path):
    """The audio model with its time axis made symbolic, as an export with
    dynamic_axes on every axis would be."""
    model = onnx.load(corpus_path("torch_audio1d_softmax"))
    dim = model.graph.input[0].type.tensor_type.shape.dim[2]
    dim.Clear()
    dim.dim_param = "T"
    path = tmp_path / "free.onnx"
    onnx.save(model, path)
    return path


def test_free_dimension_needs_input_shape(tmp_path):
    path = _with_free_length(tmp_path)
    with pytest.raises(FrontendError) as err:
        import_onnx(str(path), "x")
    msg = str(err.value)
    assert "free.onnx" in msg and "'input'" in msg and "'T'" in msg and "input_shape:" in msg
    graph, _ = import_onnx(str(path), "x", input_shape={"*": [1, 1, 1024]})
    assert graph.tensor(graph.inputs[0]).shape == [1, 1024, 1]


def test_input_shape_in_the_model_yaml(tmp_path):
    path = _with_free_length(tmp_path)
    yaml = tmp_path / "free.yaml"
    yaml.write_text("description: free length\nonnx: free.onnx\ninput_shape: {input: [1, 1, 512]}\n")
    out = tmp_path / "out"
    scons("target=host", f"model={yaml}", out=out, check=True)
    assert report(out, "host", "free")["verdict"] == "pass"
    yaml.write_text("description: free length\nonnx: free.onnx\ninput_shape: [1, 1]\n")
    line = one_error(scons("target=host", f"model={yaml}", out=out))
    assert "input_shape" in line and "'input'" in line and "has 2 dimensions, the input has 3" in line


def _qdq_graph(tmp_path, middle, outputs=()):
    """input -> Q -> DQ -> Conv(1x1) -> Q -> DQ -> <middle nodes> -> Q -> DQ -> Conv -> Q -> DQ."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(rng.integers(-50, 50, (4, 4, 1, 1)).astype(np.int8), "w"),
             numpy_helper.from_array(np.full(4, 0.01, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(4, np.int8), "wz")]
    def conv(i, x, y):
        return [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], [f"wd{i}"], axis=0),
                helper.make_node("Conv", [x, f"wd{i}"], [f"c{i}"], name=f"conv{i}"),
                helper.make_node("QuantizeLinear", [f"c{i}", "s", "z"], [f"q{i}"]),
                helper.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [y])]
    nodes = [helper.make_node("QuantizeLinear", ["input", "s", "z"], ["qin"]),
             helper.make_node("DequantizeLinear", ["qin", "s", "z"], ["din"])]
    nodes += conv(0, "din", "a") + middle + [helper.make_node("QuantizeLinear", ["m", "s", "z"], ["qm"]),
                                            helper.make_node("DequantizeLinear", ["qm", "s", "z"], ["dm"])]
    nodes += conv(1, "dm", "output")
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4, 3, 5])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["n", "c", "h", "w"])
                           for o in ("output",) + tuple(outputs)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8          # what ONNX Runtime reads
    path = str(tmp_path / "hand.onnx")
    onnx.save(m, path)
    return path


def test_layout_changing_transpose_mid_network_is_a_layer(tmp_path):
    """A Transpose swapping H and W between two convolutions (once a
    one-line error) moves the values: one IR transpose layer, within 1 LSB
    of ONNX Runtime (exact: it moves values); also when a float Relu follows
    it (ONNX Runtime's basic optimizations move a QDQ pair between them)."""
    path = _qdq_graph(tmp_path, [helper.make_node("Transpose", ["a"], ["t"], name="swap", perm=[0, 1, 3, 2]),
                                 helper.make_node("Relu", ["t"], ["m"])])
    graph, weights = import_onnx(path, "x")
    assert [layer.op for layer in graph.layers] == ["pointwise", "transpose", "lut", "pointwise"]
    rows = compare(for_ort_check(onnx.load(path), path), graph, weights, golden.random_input(graph, 0))
    assert max(r["max_diff"] for r in rows) <= 1
    path = _qdq_graph(tmp_path, [helper.make_node("Transpose", ["a"], ["m"], name="swap", perm=[0, 1, 3, 2])])
    graph, weights = import_onnx(path, "x")
    assert [(layer.op, layer.perm) for layer in graph.layers] == [("pointwise", None), ("transpose", [1, 0, 2]),
                                                                   ("pointwise", None)]
    rows = compare(for_ort_check(onnx.load(path), path), graph, weights, golden.random_input(graph, 0))
    assert max(r["max_diff"] for r in rows) <= 1


def test_requantization_between_two_scales_is_a_layer(tmp_path):
    """Q(s1) -> DQ -> Q(s2) (TFLite's QUANTIZE): a requantization layer,
    within 1 LSB of ONNX Runtime (here int8 scale s -> uint8 scale s2, then
    back). Between two int8 pairs ONNX Runtime's basic optimizations
    already quantize once with the last scale (its double-QDQ-pair
    remover), and tessera imports what they leave."""
    path = _qdq_graph(tmp_path, [helper.make_node("QuantizeLinear", ["a", "s2", "z2"], ["qr"], name="requant"),
                                 helper.make_node("DequantizeLinear", ["qr", "s2", "z2"], ["m"])])
    model = onnx.load(path)
    model.graph.initializer.extend([numpy_helper.from_array(np.array(0.11, np.float32), "s2"),
                                    numpy_helper.from_array(np.array(128, np.uint8), "z2")])
    onnx.save(model, path)
    graph, weights = import_onnx(path, "x")
    assert [l.op for l in graph.layers] == ["pointwise", "avgpool", "avgpool", "pointwise"]
    assert graph.layers[1].kernel == [1, 1] and graph.tensor(graph.layers[1].output).scale == pytest.approx(0.11)
    rows = compare(path, graph, weights, golden.random_input(graph, 0))
    # the requantization's output is the graph's tensor 'qr': compared too
    assert len(rows) == 4 and max(r["max_diff"] for r in rows) <= 1


def test_ort_check_stops_the_build_or_warns(tmp_path):
    """A golden model more than 1 LSB from ONNX Runtime: one line naming
    the layer, or a warning with `ort_check: warn`."""
    from tessera.model import prepare

    data = {"layers": [{"layer": "a", "max_diff": 0, "differing": 0.0},
                       {"layer": "b", "max_diff": 3, "differing": 0.25}], "limit": 1}
    model = {"name": "m", "path": "m.yaml", "ort_check": "error"}
    with pytest.raises(prepare.OrtMismatch) as err:
        prepare._ort_verdict(model, data, print)
    assert "m.yaml: layer b differs from ONNX Runtime by 3 LSB" in str(err.value)
    said = []
    prepare._ort_verdict(dict(model, ort_check="warn"), data, said.append)
    assert said == [next(s for s in said if "warning: m: layer b" in s)]


def test_unsupported_op_is_named_before_the_layers_behind_it(tmp_path):
    """Not the convolution after it (whose input then is unknown): the op."""
    path = _qdq_graph(tmp_path, [helper.make_node("Cos", ["a"], ["m"], name="odd")])
    with pytest.raises(FrontendError) as err:
        import_onnx(path, "x")
    msg = str(err.value)
    assert "node 'odd' (Cos): unsupported op" in msg and "conv1" not in msg


def test_view_into_other_parameters_is_a_requantization(tmp_path):
    """DQ -> Flatten -> Q with other parameters: a requantization (before the
    view, where the tensor is still NCHW), within 1 LSB of ONNX Runtime."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(np.array(0.11, np.float32), "s2"),
             numpy_helper.from_array(np.array(128, np.uint8), "z2"),
             numpy_helper.from_array(rng.integers(-50, 50, (4, 4, 1, 1)).astype(np.int8), "w"),
             numpy_helper.from_array(rng.integers(-50, 50, (6, 60)).astype(np.int8), "fc"),
             numpy_helper.from_array(np.full(4, 0.01, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(4, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.01, np.float32), "fs")]
    nodes = [helper.make_node("QuantizeLinear", ["input", "s", "z"], ["qin"]),
             helper.make_node("DequantizeLinear", ["qin", "s", "z"], ["din"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("Conv", ["din", "wd"], ["c"], name="conv"),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["qc"]),
             helper.make_node("DequantizeLinear", ["qc", "s", "z"], ["dc"]),
             helper.make_node("Flatten", ["dc"], ["f"], name="flatten"),
             helper.make_node("QuantizeLinear", ["f", "s2", "z2"], ["qf"], name="rq"),
             helper.make_node("DequantizeLinear", ["qf", "s2", "z2"], ["df"]),
             helper.make_node("DequantizeLinear", ["fc", "fs"], ["fcd"]),
             helper.make_node("Gemm", ["df", "fcd"], ["g"], name="fc", transB=1),
             helper.make_node("QuantizeLinear", ["g", "s", "z"], ["qg"]),
             helper.make_node("DequantizeLinear", ["qg", "s", "z"], ["output"])]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4, 3, 5])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 6])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = str(tmp_path / "view.onnx")
    onnx.save(m, path)
    graph, weights = import_onnx(path, "x")
    assert [l.op for l in graph.layers] == ["pointwise", "avgpool", "linear"]
    requant = graph.layers[1]
    assert requant.kernel == [1, 1] and graph.tensor(requant.output).scale == pytest.approx(0.11)
    rows = compare(path, graph, weights, golden.random_input(graph, 0))
    assert len(rows) == 2 and max(r["max_diff"] for r in rows) <= 1


def test_model_yaml_intake_options_are_checked(tmp_path):
    from tessera import config
    from tessera.errors import ConfigError

    shutil.copy(corpus_path("torch_audio1d_softmax"), tmp_path / "m.onnx")
    yaml = tmp_path / "m.yaml"
    yaml.write_text("description: m\nonnx: m.onnx\nort_check: maybe\n")
    with pytest.raises(ConfigError) as err:
        config.load_model(str(yaml), "m")
    assert "ort_check" in str(err.value) and "warn" in str(err.value)
    yaml.write_text("description: m\nonnx: m.onnx\ninput_shape: [1, 0, 3]\n")
    with pytest.raises(ConfigError) as err:
        config.load_model(str(yaml), "m")
    assert "input_shape" in str(err.value) and "positive" in str(err.value)
    yaml.write_text("description: m\nonnx: m.onnx\nort_check: warn\ninput_shape: {input: [1, 1, 1024]}\n")
    model = config.load_model(str(yaml), "m")
    assert model["ort_check"] == "warn" and model["input_shape"] == {"input": [1, 1, 1024]}


@pytest.mark.qemu
def test_corpus_resize_too_large_for_l1_runs_in_channel_blocks(tmp_path):
    """The segmentation net's bilinear resize does not fit the STM32F4's
    16 kB L1 whole: it runs in blocks of channels, bit-exact under QEMU (a
    whole-tensor op with no blocks that does not fit is one line naming the
    layer and the bytes: tests/test_ops_build.py)."""
    needs("arm-none-eabi-gcc", "qemu-system-arm")
    out = tmp_path / "out"
    name = "torch_segnet_resize_concat"
    scons("target=stm32f4", f"model={os.path.join(CORPUS, name + '.yaml')}", out=out, check=True)
    rep = report(out, "stm32f4", name)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    # SegNet (tools/corpus/make_torch.py): d1 is 16 channels at 16x16 (32x32
    # input, stride 2), up2 doubles it: input and output together need
    # 16 * 16 * 16 + 32 * 32 * 16 bytes, more than the 16384 of L1
    up2 = next(layer for layer in rep["layers"] if layer["name"] == "up2_Resize")
    assert up2["n_tiles"] > 1 and up2["l1_bytes"] <= 16384 < 16 * 16 * 16 + 32 * 32 * 16
    assert {layer["kernel"] for layer in rep["layers"] if layer["op"] == "resize"} == {"tsr_cmsis_resize"}


# ---- forms of real exports that once stopped the import (issue 26) -------------------

def test_min_max_of_a_constant_are_tables(tmp_path):
    """torch.maximum/minimum of a tensor and a constant (a clip, one per
    channel or one for all): a table, within 1 LSB of ONNX Runtime."""
    per_channel = numpy_helper.from_array(np.array([-0.1, 0.2, 0.0, 0.3], np.float32).reshape(1, 4, 1, 1), "cmax")
    scalar = numpy_helper.from_array(np.array(0.25, np.float32), "cmin")
    path = _qdq_graph(tmp_path, [helper.make_node("Max", ["a", "cmax"], ["b"], name="max"),
                                 helper.make_node("Min", ["b", "cmin"], ["m"], name="min")])
    model = onnx.load(path)
    # Max and Min each between their own Q/DQ, as quantize_static writes them
    model.graph.initializer.extend([per_channel, scalar])
    nodes = list(model.graph.node)
    i = next(k for k, n in enumerate(nodes) if n.name == "min")
    nodes[i].input[0] = "bd"
    nodes[i:i] = [helper.make_node("QuantizeLinear", ["b", "s", "z"], ["bq"]),
                  helper.make_node("DequantizeLinear", ["bq", "s", "z"], ["bd"])]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.save(model, path)
    graph, weights = import_onnx(path, "x")
    assert [layer.op for layer in graph.layers] == ["pointwise", "lut", "lut", "pointwise"]
    # the per-channel table is the layer's weights (ir.Layer), the other its own
    assert weights[graph.layers[1].weights].shape == (4, 256) and len(graph.layers[2].table) == 256
    rows = compare(for_ort_check(onnx.load(path), path), graph, weights, golden.random_input(graph, 0))
    assert max(r["max_diff"] for r in rows) <= 1


def test_long_node_names_make_bounded_file_names(tmp_path):
    """A converter's fused node names (303 characters here) once made
    SCons stop with `File name too long`: layer names keep their readable
    end and a digest, the same on every import, and the build passes."""
    path = _qdq_graph(tmp_path, [helper.make_node("Relu", ["a"], ["m"], name="relu")])
    model = onnx.load(path)
    long = "model/" + "/".join(f"block_{k}/conv2d/BiasAdd;model/block_{k}/conv2d/Conv2D" for k in range(6)) + "/x"
    assert len(long) > 300
    for node in model.graph.node:
        if node.op_type == "Conv":
            node.name = long + node.name
    onnx.save(model, path)
    names = [layer.name for layer in import_onnx(path, "x")[0].layers]
    assert names == [layer.name for layer in import_onnx(path, "x")[0].layers]
    assert all(len(n) <= 64 for n in names) and len(set(names)) == len(names)
    assert names[0].endswith(names[0][-9:]) and "Conv2D" in names[0] or "x" in names[0]
    yml = tmp_path / "long.yaml"
    yml.write_text(f"description: long node names\nonnx: {path}\n")
    out = tmp_path / "out"
    scons("target=host", f"model={yml}", out=out, check=True)
    assert report(out, "host", "long")["verdict"] == "pass"


def test_stale_shape_annotation_is_dropped_as_onnx_runtime_does(tmp_path):
    """A value_info that disagrees with what the nodes compute: ONNX Runtime
    warns and ignores it, so tessera drops it too (and says so)."""
    path = _qdq_graph(tmp_path, [helper.make_node("Relu", ["a"], ["m"], name="relu")])
    model = onnx.load(path)
    model.graph.value_info.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, [1, 4, 9, 9]))
    onnx.save(model, path)
    graph, weights = import_onnx(path, "x")
    assert graph.notes["stale_value_info"] == 1
    rows = compare(for_ort_check(onnx.load(path), path), graph, weights, golden.random_input(graph, 0))
    assert max(r["max_diff"] for r in rows) <= 1


def test_bias_wider_than_32_bits_is_lowered_exactly(tmp_path):
    """A float bias far beyond 2^31 accumulator steps (a vendor's
    segmentation export: tiny weight scales): such a channel's bias goes
    into the requantization's additive term (32-bit, in units of
    2^add_shift); within 1 LSB of ONNX Runtime, and the firmware bit-exact."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(np.array(40.0, np.float32), "so"),
             numpy_helper.from_array(rng.integers(-100, 100, (4, 3, 1, 1)).astype(np.int8), "w"),
             numpy_helper.from_array(np.full(4, 1e-7, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(4, np.int8), "wz"),
             # the bias in steps of its own scale (0.01), as the export stores it: 3000 real
             # units are 6e11 accumulator steps of 0.05 * 1e-7
             numpy_helper.from_array(np.array([300000, -250000, 100, 60000], np.int32), "bq"),
             numpy_helper.from_array(np.array(0.01, np.float32), "bs"),
             numpy_helper.from_array(np.array(0, np.int32), "bz")]
    nodes = [helper.make_node("QuantizeLinear", ["input", "s", "z"], ["qin"]),
             helper.make_node("DequantizeLinear", ["qin", "s", "z"], ["din"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["b"]),
             helper.make_node("Conv", ["din", "wd", "b"], ["c"], name="conv"),
             helper.make_node("QuantizeLinear", ["c", "so", "z"], ["qc"]),
             helper.make_node("DequantizeLinear", ["qc", "so", "z"], ["output"])]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 4, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = str(tmp_path / "wide.onnx")
    onnx.save(m, path)
    graph, weights = import_onnx(path, "wide")
    rq = graph.layers[0].requant
    assert any(rq.add) and rq.add_shift and np.all(np.abs(weights[graph.layers[0].bias]) < 2 ** 31)
    rows = compare(for_ort_check(onnx.load(path), path), graph, weights, golden.random_input(graph, 0))
    assert max(r["max_diff"] for r in rows) <= 1
    yml = tmp_path / "wide.yaml"
    yml.write_text(f"description: wide bias\nonnx: {path}\n")
    out = tmp_path / "out"
    scons("target=host", f"model={yml}", out=out, check=True)
    assert report(out, "host", "wide")["verdict"] == "pass"
