"""TFLite import: TFLite's integer arithmetic in the golden model, the model
YAML's tflite: key, and the MLPerf Tiny reference models checked against
the TFLite interpreter (ai-edge-litert) on every tensor.

The MLPerf Tiny .tflite files are not in the repository: tools/mlperf_tiny.py
copies them from a mlcommons/tiny checkout into examples/mlperf_tiny/data/,
or they lie in ../shared/mlperf_tiny/ beside the checkout (where CI finds
them); the tests that need them skip without either."""

import os

import numpy as np
import pytest

from helpers import ROOT, one_error, report, scons

from tessera.config.model import parse_model
from tessera.errors import ConfigError
from tessera.frontend.tflite import import_tflite, quantize_multiplier
from tessera import golden
from tessera.golden import ops, tflitecheck

DATA_DIRS = [os.path.join(ROOT, "examples", "mlperf_tiny", "data"),
             os.path.join(os.path.dirname(ROOT), "shared", "mlperf_tiny")]
MLPERF = {"ad01": "ad01_int8.tflite", "kws": "kws_ref_model.tflite",
          "ic_resnet8": "pretrainedResnet_quant.tflite", "vww": "vww_96_int8.tflite"}


def mlperf(name):
    for folder in DATA_DIRS:
        path = os.path.join(folder, MLPERF[name])
        if os.path.exists(path):
            return path
    pytest.skip(f"{MLPERF[name]} in none of {DATA_DIRS} (tools/mlperf_tiny.py fetches it)")


def mlperf_yaml(name, tmp_path):
    """examples/mlperf_tiny/<name>.yaml, pointed at wherever the file is."""
    with open(os.path.join(ROOT, "examples", "mlperf_tiny", f"{name}.yaml")) as f:
        text = f.read()
    yml = tmp_path / f"{name}.yaml"
    yml.write_text(text.replace(f"tflite: data/{MLPERF[name]}", f"tflite: {mlperf(name)}"))
    return yml


# ---- arithmetic ---------------------------------------------------------------

def test_double_rounding_differs_from_single():
    # 3548 * 1442659867 / 2^31 = 2383.50040..., rounded to 2384; 2384 / 2^5 =
    # 74.5, rounded away from zero to 75, where the exact product / 2^36 is
    # 74.48 (single rounding: 74): TFLite's two roundings
    assert ops.tflite_multiply(np.array([3548]), 1442659867, 36).tolist() == [75]
    assert ops.tflite_multiply(np.array([-3548]), 1442659867, 36).tolist() == [-75]
    assert ((3548 * 1442659867 + (1 << 35)) >> 36) == 74


def test_rounding_of_each_step():
    # multiplier 2^30 and shift 31 (0.5, no shift after the multiply): the
    # high multiply's nudge (+2^30, or 1 - 2^30 below zero, then a division
    # toward zero) rounds halves up: 2.5 -> 3, -2.5 -> -2, 3.5 -> 4, -3.5 -> -3
    x = np.array([6, -6, 5, -5, 7, -7, 2, -2])
    assert ops.tflite_multiply(x, 1 << 30, 31).tolist() == [3, -3, 3, -2, 4, -3, 1, -1]
    # shift 32 adds a rounding divide by 2, halves away from zero:
    # 5 -> 3 -> 1.5 -> 2; -5 -> -2 -> -1; 3 -> 2 -> 1; -3 -> -1 -> -0.5 -> -1
    assert ops.tflite_multiply(np.array([5, -5, 3, -3]), 1 << 30, 32).tolist() == [2, -1, 1, -1]


def test_quantize_multiplier_as_tflite():
    # QuantizeMultiplier: frexp, round(q * 2^31) half away from zero, 2^31 folds into the exponent
    assert quantize_multiplier(0.5) == (1 << 30, 31)
    assert quantize_multiplier(1.0) == (1 << 30, 30)
    assert quantize_multiplier(0.75) == (3 << 29, 31)
    assert quantize_multiplier(1 - 2 ** -40) == (1 << 30, 30)
    assert quantize_multiplier(0.0) == (0, 31)


def test_average_pool_division_rounds_half_away():
    acc = np.array([[[5, -5, 6, -6, 7, -7, 0]]])
    from tessera.ir import Requant
    rq = Requant(mul=[4], add=[0], shift=[0], rounding="tflite_div", zero_point=0, lo=-128, hi=127)
    # (|acc| + 2) // 4 with the sign: 5/4 -> 1, 6/4 = 1.5 -> 2, 7/4 -> 2
    assert ops.requantize(acc, rq).reshape(-1).tolist() == [1, -1, 2, -2, 2, -2, 0]


# ---- the model YAML --------------------------------------------------------------

def test_yaml_takes_exactly_one_source(tmp_path):
    f = tmp_path / "m.tflite"
    f.write_bytes(b"\0\0\0\0TFL3")
    with pytest.raises(ConfigError, match="exactly one of"):
        parse_model({"description": "x", "tflite": "m.tflite", "onnx": "m.onnx"}, str(tmp_path / "m.yaml"), "m")
    with pytest.raises(ConfigError, match="tflite: file not found"):
        parse_model({"description": "x", "tflite": "none.tflite"}, str(tmp_path / "m.yaml"), "m")
    m = parse_model({"description": "x", "tflite": "m.tflite"}, str(tmp_path / "m.yaml"), "m")
    assert m["tflite"] == str(f) and m["drop_final_softmax"] is False


def test_not_a_flatbuffer_is_one_line(tmp_path):
    f = tmp_path / "bad.tflite"
    f.write_bytes(b"not a model at all")
    from tessera.errors import FrontendError
    with pytest.raises(FrontendError, match="not a TFLite flatbuffer"):
        import_tflite(str(f), "bad")


# ---- the MLPerf Tiny models against the interpreter -------------------------------

@pytest.mark.parametrize("name", sorted(MLPERF))
@pytest.mark.parametrize("seed", [0, 1])
def test_mlperf_every_tensor_equals_interpreter(name, seed):
    path = mlperf(name)
    graph, weights = import_tflite(path, name)
    inputs = golden.random_input(graph, seed)
    values = golden.run(graph, weights, inputs)
    result = tflitecheck.compare(path, graph, values, inputs)
    assert result["tensors"] == len(graph.layers) + 1
    bad = [r for r in result["compared"] if not r["equal"]]
    assert not bad, bad[:2]


def test_drop_final_softmax_ends_at_the_logits():
    path = mlperf("kws")
    full = import_tflite(path, "kws")[0]
    dropped = import_tflite(path, "kws", drop_final_softmax=True)[0]
    assert full.layers[-1].op == "softmax" and dropped.layers[-1].op == "linear"
    assert dropped.outputs == [full.layers[-1].inputs[0]]


@pytest.mark.parametrize("name", ["kws"])
def test_mlperf_firmware_on_host(tmp_path, name):
    out = str(tmp_path / "out")
    scons("target=host", f"model={mlperf_yaml(name, tmp_path)}", out=out, check=True)
    rep = report(out, "host", name)
    assert rep["verdict"] == "pass"
    assert rep["tflite"]["every_tensor_equal"] is True
    assert rep["tflite"]["kernels"] == "BUILTIN_REF"
    assert rep["tflite"]["interpreter"].startswith("ai-edge-litert ")


# ---- small models from TensorFlow's converter (tests/data/tflite, tools/tflite_models.py) ----

SMALL = os.path.join(ROOT, "tests", "data", "tflite")
CONVERTED = ("convs", "residual", "pad_pool", "mean", "issue10_ops", "dilated", "softmax", "unsupported_transpose",
             "const_image_mul")


@pytest.mark.parametrize("name", CONVERTED)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_converted_every_tensor_equals_interpreter(name, seed):
    path = os.path.join(SMALL, name + ".tflite")
    graph, weights = import_tflite(path, name)
    inputs = golden.random_input(graph, seed)
    values = golden.run(graph, weights, inputs)
    result = tflitecheck.compare(path, graph, values, inputs)
    bad = [r for r in result["compared"] if not r["equal"]]
    # one tensor per TFLite operator (a MUL by a constant image is three layers)
    assert result["tensors"] == len({tuple(l.source) for l in graph.layers}) + 1 and not bad, bad[:2]


def test_converted_lowering():
    ops_of = {n: [l.op for l in import_tflite(os.path.join(SMALL, n + ".tflite"), n)[0].layers] for n in CONVERTED}
    # QUANTIZE/DEQUANTIZE are the edges, PAD folds, RESHAPE aliases, the
    # depth multiplier 2 is a conv2d
    assert ops_of["convs"] == ["conv2d", "depthwise", "conv2d", "pointwise", "conv2d", "avgpool", "linear", "linear"]
    assert ops_of["residual"] == ["conv2d", "conv2d", "pointwise", "add", "maxpool", "conv2d", "add", "avgpool",
                                  "linear"]
    # the PAD a max pool reads is a depthwise identity
    assert ops_of["pad_pool"] == ["conv2d", "depthwise", "maxpool", "depthwise", "linear"]
    # MEAN over H and W (with and without keep_dims) and a standalone RELU
    # are average pools; the ADD reads a RESHAPE to a vector
    assert ops_of["mean"] == ["conv2d", "avgpool", "avgpool", "avgpool", "add", "linear"]
    # MUL by a constant over the image: a 1x1 depthwise of the activation
    # viewed as one pixel (the constant's zero point as the weight offset)
    assert ops_of["const_image_mul"] == ["conv2d", "reshape", "depthwise", "reshape", "reshape", "depthwise",
                                         "reshape", "pointwise"]
    # dilation (2x2, 2x3 with SAME padding on the dilated extent, depthwise 2x2)
    dil = import_tflite(os.path.join(SMALL, "dilated.tflite"), "dilated")[0].layers
    assert [(l.op, l.dilation, l.pad) for l in dil] == [("conv2d", [2, 2], [0, 0, 0, 0]),
                                                        ("conv2d", [2, 3], [2, 3, 2, 3]),
                                                        ("depthwise", [2, 2], [2, 2, 2, 2])]


@pytest.mark.parametrize("name,line", [
    ("unsupported_float", "operator 0 (CONV_2D): a float layer (input 'serving_default_keras_tensor"),
    ("unsupported_int16", "operator 0 (QUANTIZE): int16 activations ("),
])
def test_unsupported_is_one_line(tmp_path, name, line):
    yaml = tmp_path / f"{name}.yaml"
    yaml.write_text(f"description: {name}\ntflite: {os.path.join(SMALL, name + '.tflite')}\n")
    res = scons("target=host", f"model={yaml}", out=str(tmp_path / "out"))
    err = one_error(res)
    assert line in err and f"{name}.tflite" in err


def test_converted_firmware_on_host(tmp_path):
    out = str(tmp_path / "out")
    for name in CONVERTED:
        yaml = tmp_path / f"{name}.yaml"
        yaml.write_text(f"description: {name}\ntflite: {os.path.join(SMALL, name + '.tflite')}\n")
        scons("target=host", f"model={yaml}", out=out, check=True)
        rep = report(out, "host", name)
        assert rep["verdict"] == "pass" and rep["tflite"]["every_tensor_equal"] is True


@pytest.mark.parametrize("name", ["logistic", "logistic_wide", "hard_swish", "hard_swish_wide", "tanh", "tanh_wide"])
def test_activation_tables_equal_interpreter(name):
    """LOGISTIC, HARD_SWISH and TANH tables (TFLite's recipes, for the IR's
    lut op) against the interpreter on all 256 int8 inputs."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from tessera.frontend.tflite_luts import hard_swish_table, logistic_table, tanh_table

    interp = Interpreter(model_path=os.path.join(SMALL, name + ".tflite"),
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    d, o = interp.get_input_details()[0], interp.get_output_details()[0]
    interp.set_tensor(d["index"], np.arange(-128, 128, dtype=np.int8).reshape(d["shape"]))
    interp.invoke()
    expected = interp.get_tensor(o["index"]).reshape(-1).tolist()
    make = {"logistic": logistic_table, "hard_swish": hard_swish_table, "tanh": tanh_table}[name.split("_w")[0]]
    (s_in, z_in), (s_out, z_out) = d["quantization"], o["quantization"]
    assert make(s_in, z_in, s_out, z_out) == expected


def test_issue10_recipes_equal_interpreter():
    """MUL (same shape and broadcast), CONCATENATION, LOGISTIC and HARD_SWISH
    as tessera lowers them (the multiplier of frontend.tflite, the tables of
    tflite_luts), each computed from the interpreter's own inputs to the
    operator and compared with its output: the recipes, before issue 10's
    IR ops run them."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from tessera.frontend.tflite_luts import hard_swish_table, logistic_table

    interp = Interpreter(model_path=os.path.join(SMALL, "issue10_ops.tflite"), experimental_preserve_all_tensors=True,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    d = interp.get_input_details()[0]
    interp.set_tensor(d["index"], np.random.default_rng(0).integers(-128, 128, size=d["shape"]).astype(np.int8))
    interp.invoke()
    quant = {t["index"]: t["quantization"] for t in interp.get_tensor_details()}
    seen = set()
    for op in interp._get_ops_details():
        name, ins, out = op["op_name"], [int(i) for i in op["inputs"]], int(op["outputs"][0])
        xs = [interp.get_tensor(i).astype(np.int64) for i in ins]
        (so, zo) = quant[out]
        if name in ("LOGISTIC", "HARD_SWISH"):
            (si, zi) = quant[ins[0]]
            table = np.array((logistic_table if name == "LOGISTIC" else hard_swish_table)(si, zi, so, zo))
            got = table[xs[0] + 128]
        elif name == "MUL":
            (sa, za), (sb, zb) = quant[ins[0]], quant[ins[1]]
            m, s = quantize_multiplier(float(sa) * float(sb) / float(so))
            got = np.clip(ops.tflite_multiply((xs[0] - za) * (xs[1] - zb), m, s) + zo, -128, 127)
        elif name == "CONCATENATION":
            assert all(quant[i] == quant[out] for i in ins)   # int8 concatenation is a copy
            got = np.concatenate(xs, axis=-1)
        else:
            continue
        seen.add(name)
        assert np.array_equal(got, interp.get_tensor(out)), name
    assert seen == {"LOGISTIC", "HARD_SWISH", "MUL", "CONCATENATION"}


def test_issue10_ops_lowering():
    """HARD_SWISH and LOGISTIC become lut layers, MUL (broadcast and not)
    mul layers, CONCATENATION a concat layer."""
    graph, _ = import_tflite(os.path.join(SMALL, "issue10_ops.tflite"), "issue10_ops")
    assert [l.op for l in graph.layers] == ["conv2d", "lut", "avgpool", "pointwise", "lut", "mul", "pointwise",
                                            "concat", "mul"]


@pytest.mark.qemu
@pytest.mark.parametrize("target,tools", [("stm32h7", ("arm-none-eabi-gcc", "qemu-system-arm")),
                                          ("gap8", ("riscv64-unknown-elf-gcc", "qemu-system-riscv32"))])
def test_converted_firmware_under_qemu(tmp_path, target, tools):
    """The CMSIS-NN-style and PULP-NN-style libraries hand the layers with
    TFLite's roundings to the reference kernels and keep their own for the
    rest (FULLY_CONNECTED rounds half up): bit-exact either way."""
    import shutil

    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")
    out = str(tmp_path / "out")
    for name in ("residual", "issue10_ops", "softmax", "const_image_mul"):
        yaml = tmp_path / f"{name}.yaml"
        yaml.write_text(f"description: {name}\ntflite: {os.path.join(SMALL, name + '.tflite')}\n")
        scons(f"target={target}", f"model={yaml}", out=out, check=True)
        rep = report(out, target, name)
        assert rep["verdict"] == "pass" and rep["tflite"]["every_tensor_equal"] is True


@pytest.mark.parametrize("name", ["softmax", "kws", "vww", "ic_resnet8"])
def test_softmax_recipe_equals_interpreter(name):
    """TFLite's reference int8 SOFTMAX (gemmlowp's exp, reciprocal and
    rounding shift; golden.gemmlowp.softmax_rows) against the interpreter's, on
    the interpreter's own SOFTMAX inputs: 40 rows of 10 values (the small
    model), or the MLPerf classifiers' final SOFTMAX on 10 inputs each."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from tessera.frontend.tflite_luts import softmax_exp_table
    from tessera.golden.gemmlowp import softmax_rows

    path = os.path.join(SMALL, "softmax.tflite") if name == "softmax" else mlperf(name)
    interp = Interpreter(model_path=path, experimental_preserve_all_tensors=True,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    op = [o for o in interp._get_ops_details() if o["op_name"] == "SOFTMAX"][0]
    x_idx, y_idx = int(op["inputs"][0]), int(op["outputs"][0])
    quant = {t["index"]: t["quantization"] for t in interp.get_tensor_details()}
    assert quant[y_idx] == (1 / 256, -128)
    table = softmax_exp_table(1.0, quant[x_idx][0])   # Keras' softmax: beta 1
    d = interp.get_input_details()[0]
    for seed in range(40 if name == "softmax" else 10):
        interp.set_tensor(d["index"], np.random.default_rng(seed).integers(-128, 128, size=d["shape"]).astype(np.int8))
        interp.invoke()
        assert np.array_equal(softmax_rows(interp.get_tensor(x_idx), table), interp.get_tensor(y_idx)), seed


def test_a_difference_names_the_first_tensor():
    """The check is a real check: the interpreter's tensors against a golden
    model with one element changed name that tensor and element."""
    path = os.path.join(SMALL, "residual.tflite")
    graph, weights = import_tflite(path, "residual")
    inputs = golden.random_input(graph, 0)
    values = golden.run(graph, weights, inputs)
    name = graph.layers[3].output                       # the first ADD's output
    changed = values[name].copy()
    changed.reshape(-1)[5] = changed.reshape(-1)[5] + (1 if changed.reshape(-1)[5] < 127 else -1)
    values[name] = changed
    result = tflitecheck.compare(path, graph, values, inputs)
    assert not result["equal"]
    bad = [r for r in result["compared"] if not r["equal"]]
    assert [r["tensor"] for r in bad] == [name] and bad[0]["first"]["index"] == 5 and bad[0]["first"]["mismatches"] == 1
    with pytest.raises(tflitecheck.TfliteMismatch, match=rf"at tensor {name[1:]} '.*': element 5 is "):
        tflitecheck.check("residual", path, result)
