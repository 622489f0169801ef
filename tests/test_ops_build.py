"""The operators of real exports (issue 10) built into firmware: small QDQ
graphs quantized by ONNX Runtime, bit-exact against the golden model on the
host (tiled where L1 is small), and a compact MobileNetV3-like block (dilated
depthwise, hardswish, squeeze-and-excitation mul, bilinear resize, concat,
sigmoid) under QEMU on stm32h7 (CMSIS-NN with per-layer fallback) and gap8
(PULP-NN-style kernels, 8 cores)."""

import json
import shutil

import pytest

from helpers import one_error, report, scons
from opgraphs import build, quantize
from test_build_host import host_variant


def model_yaml(tmp_path, kind, activation="int8", per_channel=True):
    onnx_path = quantize(build(kind), tmp_path / f"{kind}_{activation}.onnx", activation=activation,
                         per_channel=per_channel)
    path = tmp_path / f"{kind}_{activation}.yaml"
    path.write_text(f"description: issue 10 test graph {kind}\nonnx: {onnx_path}\ninput: {{seed: 1}}\n")
    return str(path)


def passed(out, target, path):
    name = path.rsplit("/", 1)[-1][:-5]
    rep = report(out, target, name)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"]), rep["layers"]
    return rep


@pytest.mark.parametrize("kind, activation", [("mbv3", "int8"), ("mbv3", "uint8"), ("se", "int8"),
                                              ("softmax", "int8"), ("PRelu", "uint8"), ("tcn1d", "int8"),
                                              ("pools", "int8"), ("resize_align", "int8"), ("Tanh", "int8"),
                                              ("se_sigmoid", "uint8"), ("resize_sizes", "uint8")])
def test_new_ops_bit_exact_on_host(tmp_path, kind, activation):
    out = tmp_path / "out"
    path = model_yaml(tmp_path, kind, activation)
    scons("target=host", f"model={path}", out=out, check=True)
    passed(out, "host", path)


def test_per_tensor_weights_on_host(tmp_path):
    out = tmp_path / "out"
    path = model_yaml(tmp_path, "mbv3", per_channel=False)
    scons("target=host", f"model={path}", out=out, check=True)
    passed(out, "host", path)


def small_l1(data):
    data["memory"]["L1"]["size"] = 3000


def test_dilated_layers_and_tables_are_tiled_with_their_halo(tmp_path):
    """With a 3000-byte L1 the dilated convolutions, tables and products
    (same shape, and by a [1, 1, C] vector) run in several tiles (halos of
    the dilated window) and stay bit-exact."""
    out = tmp_path / "out"
    target = host_variant(tmp_path, "host_small", small_l1)
    for kind in ("dilated", "swish", "se_sigmoid"):
        path = model_yaml(tmp_path, kind)
        scons(f"target={target}", f"model={path}", out=out, check=True)
        name = f"{kind}_int8"
        rep = passed(out, "host_small", path)
        tiled = {layer["name"] for layer in rep["layers"] if layer["tiled"]}
        with open(out / "host_small" / name / "graph.json") as f:
            g = json.load(f)
        size = lambda t: g["tensors"][t]["shape"][0] * g["tensors"][t]["shape"][1] * g["tensors"][t]["shape"][2]  # noqa: E731
        # the layers whose input and output alone exceed the 3000 bytes
        special = {layer["name"] for layer in g["layers"] if (layer.get("dilation") or layer["op"] in ("lut", "mul"))
                   and size(layer["inputs"][0]) + size(layer["output"]) > 3000}
        assert special and special <= tiled, (special, tiled)


def test_whole_tensor_op_that_does_not_fit_is_one_line(tmp_path):
    def tiny_l1(data):
        data["memory"]["L1"]["size"] = 1200

    target = host_variant(tmp_path, "host_tiny", tiny_l1)
    path = model_yaml(tmp_path, "resize_nearest")
    line = one_error(scons(f"target={target}", f"model={path}", out=tmp_path / "out"))
    assert "computed on whole tensors" in line and "bytes of L1" in line


def needs(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")


@pytest.mark.qemu
@pytest.mark.parametrize("target", ["stm32h7", "gap8"])
def test_mobilenetv3_block_under_qemu(tmp_path, target):
    if target == "stm32h7":
        needs("arm-none-eabi-gcc", "qemu-system-arm")
    else:
        needs("riscv64-unknown-elf-gcc", "qemu-system-riscv32")
    out = tmp_path / "out"
    path = model_yaml(tmp_path, "mbv3")
    scons(f"target={target}", f"model={path}", out=out, check=True)
    rep = passed(out, target, path)
    assert {"lut", "mul", "resize", "concat", "depthwise"} <= {layer["op"] for layer in rep["layers"]}
