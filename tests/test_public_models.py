"""Every published model of ../shared/public_models/ and ../shared/mlperf_tiny/
(TFLite Micro, Coral, Arm, NXP, MIT's TinyEngine, Silicon Labs, GreenWaves,
TinyMaix, TVM, Efinix, AMD and ONNX's own tests; provenance in their
READMEs), read in place as a user would point a model YAML at them
(tools/public_models.py writes the same YAMLs):

- every file: imported and its golden model checked against its runtime,
  every tensor equal to the TFLite interpreter's, or every layer within 1
  LSB of ONNX Runtime; or, for what tessera cannot take, its one line naming
  the file, the operator and what to do;
- firmware on the host: the files whose graphs exercise distinct lowerings
  (uint8 throughout, transposes, channel shuffles, views, tables, LeakyRelu
  folded into a convolution, parameter inputs), bit-exact; the rest are
  `slow` (each a whole build of a larger network, the same paths);
- under QEMU: a sample on stm32h7 and gap8.

The tests skip when the shared corpus is not beside the checkout."""

import os
import sys

import numpy as np
import pytest

from helpers import ROOT, one_error, report, scons

sys.path.insert(0, os.path.join(ROOT, "tools"))
import public_models  # noqa: E402

FILES = {f["name"]: f for f in public_models.files()}

# what cannot be taken yet: the one line's words (file, operator, what to do)
REFUSED = {
    "keyword_scrambled_8bit": ["operator 1 (SVDF)", "is not lowered"],
    "deeplabv3_mnv2_dm05_pascal_quant": ["operator 64 (RESIZE_BILINEAR)", "uint8 bilinear resize",
                                         "int8 RESIZE_BILINEAR"],
}
ACCEPTED = sorted(n for n in FILES if n not in REFUSED)
# built into host firmware in every run: one of each distinct lowering, small and quick
HOST = ("mnist_model_quant",            # uint8 I/O around an int8 body
        "mobilenet_v1_0_25_128_quant",  # TF1 uint8 throughout: weight offsets, uint8 softmax
        "split_concat",                 # uint8, three inputs, SPLIT outputs (gathers)
        "ds_cnn_s_quantized",           # a flat input viewed as a spectrogram
        "vww",                          # TRANSPOSE -> MEAN -> MEAN folded, float I/O
        "yolo_person_detect",           # LEAKY_RELU tables, RESIZE_NEAREST_NEIGHBOR, two outputs
        "qlinearconv_model",            # ONNX parameter inputs, uint8 weights with a zero point
        "person_detect")                # a repaired quantized_dimension
QEMU = {"stm32h7": ("mnist_model_quant", "split_concat", "ds_cnn_s_quantized",
                    "mobilenet_v1_0_25_128_quant",     # uint8 weights on the DSP kernels
                    "keyword_spotting_on_off_v3"),     # 106 layers: the data reservation grows with them
        "gap8": ("mnist_model_quant", "split_concat", "yolo_person_detect",
                 "visual_wake_quant")}                 # a 640-channel ADD's tables as weights in L3
TOOLS = {"stm32h7": ("arm-none-eabi-gcc", "qemu-system-arm"), "gap8": ("riscv64-unknown-elf-gcc", "qemu-system-riscv32")}


def model_file(name):
    if name not in FILES:
        pytest.skip(f"{name}: the shared corpus is not beside the checkout ({public_models.SHARED})")
    return FILES[name]


def model_yaml(tmp_path, name):
    return public_models.write_model(model_file(name), str(tmp_path / "models"))


def test_the_corpus_is_the_31_files():
    if not FILES:
        pytest.skip(f"no shared corpus at {public_models.SHARED}")
    assert len(FILES) == 31 and set(REFUSED) <= set(FILES)


@pytest.mark.parametrize("name", ACCEPTED)
def test_golden_model_equals_its_runtime(name, tmp_path):
    """Import, golden model, and the check against the file's runtime: the
    TFLite interpreter on every tensor, or ONNX Runtime per layer."""
    f = model_file(name)
    from tessera import golden
    if f["kind"] == "tflite":
        from tessera.frontend.tflite import import_tflite
        from tessera.golden import tflitecheck
        graph, weights = import_tflite(f["path"], name)
        inputs = golden.random_input(graph, 0)
        values = golden.run(graph, weights, inputs)
        result = tflitecheck.compare(f["path"], graph, values, inputs, weights)
        assert result["equal"] and result["tensors"] > 1, [r for r in result["compared"] if not r["equal"]][:1]
    else:
        import onnx
        from tessera.config.model import load_model
        from tessera.frontend import import_onnx
        from tessera.frontend.normalize import for_ort_check
        from tessera.golden.ortcheck import compare
        model = load_model(model_yaml(tmp_path, name), name)
        graph, weights = import_onnx(f["path"], name, constants=model.get("constants"))
        inputs = golden.random_input(graph, 0)
        src = for_ort_check(onnx.load(f["path"]), f["path"], None, model.get("constants"))
        rows = compare(src, graph, weights, inputs)
        assert rows and max(r["max_diff"] for r in rows) <= 1


def test_parameter_files_are_inputs_of_the_model_stage(tmp_path):
    """ONNX's QLinearConv test reads its scales and zero points from
    TensorProto files (`constants:`): a build outside SCons (CMake) must
    regenerate when one of them changes, so the model stage lists them."""
    from tessera.config.model import load_model
    from tessera.model.prepare import source_files
    model = load_model(model_yaml(tmp_path, "qlinearconv_model"), "qlinearconv_model")
    files = source_files(model)
    assert model["constants"] and all(os.path.isfile(f) and f in files for f in model["constants"].values())


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_cannot_be_taken_is_one_line(name, tmp_path):
    line = one_error(scons("target=host", f"model={model_yaml(tmp_path, name)}", out=tmp_path / "out"))
    assert os.path.basename(FILES[name]["path"]) in line
    for words in REFUSED[name]:
        assert words in line, line


def _passes(tmp_path, target, name):
    out = tmp_path / "out"
    scons(f"target={target}", f"model={model_yaml(tmp_path, name)}", out=out, check=True)
    rep = report(out, target, name)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"]), rep["layers"]
    return rep


@pytest.mark.parametrize("name", HOST)
def test_firmware_on_host(name, tmp_path):
    rep = _passes(tmp_path, "host", name)
    if FILES[name]["kind"] == "tflite":
        assert rep["tflite"]["every_tensor_equal"] is True


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ACCEPTED if n not in HOST])
def test_firmware_on_host_every_file(name, tmp_path):
    _passes(tmp_path, "host", name)


@pytest.mark.qemu
@pytest.mark.parametrize("target,name", [(t, n) for t, names in QEMU.items() for n in names])
def test_firmware_under_qemu(target, name, tmp_path):
    import shutil

    missing = [t for t in TOOLS[target] if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")
    rep = _passes(tmp_path, target, name)
    if name == "mobilenet_v1_0_25_128_quant":
        convs = [layer["kernel"] for layer in rep["layers"] if layer["op"] in ("conv2d", "pointwise", "depthwise")]
        assert all(k.startswith("tsr_cmsis_") for k in convs), convs


def test_person_detect_tells_person_from_no_person():
    """TFLite Micro's own test of person_detect: its two BMP images (rows
    top-down, grayscale 0..255 copied into the int8 input unchanged), the
    'person' score higher for person.bmp and lower for no_person.bmp, on
    the golden model (which equals the interpreter, and the firmware it)."""
    from PIL import Image

    from tessera import golden
    from tessera.frontend.tflite import import_tflite
    f = model_file("person_detect")
    graph, weights = import_tflite(f["path"], "person_detect")
    scores = {}
    for which in ("person", "no_person"):
        img = Image.open(os.path.join(os.path.dirname(f["path"]), f"person_detect_input_{which}.bmp"))
        pixels = np.frombuffer(img.tobytes(), np.uint8).astype(np.int8).reshape(96, 96, 1)
        out = golden.run(graph, weights, {graph.inputs[0]: pixels})[graph.outputs[0]].reshape(-1)
        scores[which] = out
    # outputs: [no person, person]
    assert scores["person"][1] > scores["person"][0]
    assert scores["no_person"][0] > scores["no_person"][1]
    assert "repaired" in (graph.notes or {})


def test_operator_tables_are_up_to_date():
    """docs/operators.md lists every TFLite and ONNX operator with its
    status, from the importers' own lists (tools/operators_doc.py)."""
    import operators_doc
    assert operators_doc.main(["--check"]) == 0
