"""Recurrent layers in firmware: the public LSTM models (TFLite Micro's fused
integer LSTM, Coral's with uint8 input and output around it, and Arm's LSTM
the converter unrolled into plain ops) against
the TFLite interpreter on every tensor, then built, run and checked bit for
bit on the host (Arm's with its recurrent matrix streamed through the
64000-byte L1 a block of rows per step) and under QEMU on stm32h7 and gap8."""

import os
import shutil

import numpy as np
import pytest

from helpers import report, scons

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLIC = os.path.join(ROOT, "..", "shared", "public_models")
MODELS = {"trained_lstm": "tflm/trained_lstm_int8.tflite",
          "keras_lstm_mnist": "coral/keras_lstm_mnist_ptq.tflite",
          "basic_lstm_small": "arm_ml_examples/basic_lstm_quantized_small.tflite"}


def model(name):
    path = os.path.join(ROOT, "examples", "lstm", f"{name}.yaml")
    if not os.path.exists(os.path.join(PUBLIC, MODELS[name])):
        pytest.skip("../shared/public_models is not there")
    return path


def built(tmp_path, target, name):
    out = tmp_path / "out"
    scons(f"target={target}", f"model={model(name)}", out=out, check=True)
    rep = report(out, target, name)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"]), rep["layers"]
    assert [layer["op"] for layer in rep["layers"]].count("lstm") == 1
    return rep, out / target / name


def lstm_layer(rep):
    return next(layer for layer in rep["layers"] if layer["op"] == "lstm")


def test_unrolled_lstm_is_one_layer_equal_to_the_interpreter_everywhere():
    """Arm's 697 operators become a recurrent layer, a fully connected layer
    and a softmax; every tensor of every step equals the interpreter's."""
    from tessera import golden
    from tessera.frontend.tflite import import_tflite
    from tessera.golden import tflitecheck

    path = os.path.join(PUBLIC, MODELS["basic_lstm_small"])
    model("basic_lstm_small")
    graph, weights = import_tflite(path, "basic_lstm_small")
    assert [layer.op for layer in graph.layers] == ["lstm", "linear", "softmax"]
    rnn = graph.layers[0].rnn
    assert rnn["cell"] == "ops" and rnn["steps"] == 49 and len(rnn["body"]) == 13
    rng = np.random.default_rng(1)
    inputs = {n: rng.integers(-128, 128, graph.tensor(n).shape).astype(np.int8) for n in graph.inputs}
    values = golden.run(graph, weights, inputs)
    result = tflitecheck.compare(path, graph, values, inputs, weights)
    assert result["equal"], [r for r in result["compared"] if not r["equal"]][:1]
    # the interpreter's tensors of all 49 steps' 13 ops (the last step has 12), and the rest
    assert result["tensors"] == 4 + 49 * 13 - 1


@pytest.mark.parametrize("name", ["trained_lstm", "keras_lstm_mnist"])
def test_lstm_models_bit_exact_on_host(tmp_path, name):
    rep, _ = built(tmp_path, "host", name)
    assert rep["tflite"]["every_tensor_equal"]


def test_unrolled_lstm_streams_its_matrix_on_host(tmp_path):
    rep, out = built(tmp_path, "host", "basic_lstm_small")
    import json
    with open(out / "tiling" / "unrolled_1.json") as f:
        tiling = json.load(f)
    # 61 kB of constants beside a 64000-byte L1: the recurrent matrix streams
    assert tiling["stream"]["ops"] and tiling["l1_bytes"]["total"] <= 64000


def needs(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")


@pytest.mark.qemu
@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("target", ["stm32h7", "gap8"])
def test_lstm_models_bit_exact_under_qemu(tmp_path, target, name):
    if target == "stm32h7":
        needs("arm-none-eabi-gcc", "qemu-system-arm")
    else:
        needs("riscv64-unknown-elf-gcc", "qemu-system-riscv32")
    rep, _ = built(tmp_path, target, name)
    want = {"stm32h7": "tsr_cmsis_lstm_step", "gap8": "pnn_lstm_step"}[target]
    if name != "basic_lstm_small":
        assert lstm_layer(rep)["kernel"] == want


@pytest.mark.gvsoc
def test_lstm_bit_exact_on_pulp_open(tmp_path):
    """The recurrent step's Xpulp path (pv.sdotsp.b gate rows, the cells over
    8 cores) on GVSoC."""
    from tessera.runners import gvsoc

    if gvsoc.locate() is None:
        pytest.skip("gvsoc is not on PATH (docs/gvsoc.md)")
    rep, _ = built(tmp_path, "pulp_open", "trained_lstm")
    assert rep["layers"][0]["kernel"] == "pnn_lstm_step"


CORPUS = os.path.join(ROOT, "tests", "corpus")


@pytest.mark.parametrize("name, target", [
    pytest.param("torch_kws_gru", "stm32h7", marks=pytest.mark.qemu),
    pytest.param("torch_kws_lstm", "gap8", marks=pytest.mark.qemu),
    pytest.param("torch_kws_gru", "pulp_open", marks=pytest.mark.gvsoc),
    pytest.param("torch_kws_lstm", "pulp_open", marks=pytest.mark.gvsoc)])
def test_onnx_recurrences_bit_exact_on_targets(tmp_path, name, target):
    """PyTorch's GRU and LSTM keyword spotters (tests/corpus/, within 1 LSB
    of ONNX Runtime there, bit-exact on the host by tests/test_corpus.py)
    under QEMU and on GVSoC."""
    if target == "pulp_open":
        from tessera.runners import gvsoc
        if gvsoc.locate() is None:
            pytest.skip("gvsoc is not on PATH (docs/gvsoc.md)")
    elif target == "stm32h7":
        needs("arm-none-eabi-gcc", "qemu-system-arm")
    else:
        needs("riscv64-unknown-elf-gcc", "qemu-system-riscv32")
    out = tmp_path / "out"
    scons(f"target={target}", f"model={os.path.join(CORPUS, name + '.yaml')}", out=out, check=True)
    rep = report(out, target, name)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    assert rep["layers"][0]["kernel"] == {"stm32h7": "tsr_cmsis_onnx_rnn_step"}.get(target, "pnn_onnx_rnn_step")
    assert rep["ort_check"]["worst"]["max_diff"] <= 1


def small_l1(tmp_path, target):
    import yaml

    with open(os.path.join(ROOT, "targets", target + ".yaml")) as f:
        data = yaml.safe_load(f)
    data["memory"]["L1"]["size"] = 3000
    path = tmp_path / f"{target}_l1_3000.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("model_path", ["examples/lstm/trained_lstm.yaml", "tests/corpus/torch_kws_lstm.yaml"])
def test_gate_matrices_stream_a_block_of_cells_when_l1_is_small(tmp_path, model_path):
    """With a 3000-byte L1 the gate matrices (4480 and 9344 bytes) stream
    through two L1 buffers a block of cells at a time, every step: still
    bit-exact."""
    name = os.path.basename(model_path)[:-5]
    if name == "trained_lstm":
        model(name)
    out = tmp_path / "out"
    target = small_l1(tmp_path, "host")
    scons(f"target={target}", f"model={os.path.join(ROOT, model_path)}", out=out, check=True)
    rep = report(out, "host_l1_3000", name)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    import json
    with open(out / "host_l1_3000" / name / "tiling" / f"{rep['layers'][0]['name']}.json") as f:
        tiling = json.load(f)
    assert 0 < tiling["stream"]["cells"] < 32 and tiling["l1_bytes"]["total"] <= 3000


@pytest.mark.qemu
def test_streamed_gate_matrices_on_gap8(tmp_path):
    """The blocks on GAP8: from L3 through the weight stream's chunk in L2."""
    needs("riscv64-unknown-elf-gcc", "qemu-system-riscv32")
    out = tmp_path / "out"
    target = small_l1(tmp_path, "gap8")
    scons(f"target={target}", f"model={os.path.join(CORPUS, 'torch_kws_gru.yaml')}", out=out, check=True)
    rep = report(out, "gap8_l1_3000", "torch_kws_gru")
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
