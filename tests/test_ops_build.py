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


# (the MobileNetV3-like block runs under QEMU below and per-tensor on host)
@pytest.mark.parametrize("kind, activation", [("softmax", "int8"), ("PRelu", "uint8"), ("tcn1d", "int8"),
                                              ("pools", "int8"), ("se_sigmoid", "uint8"),
                                              ("resize_sizes", "uint8"), ("mul_spatial", "int8"),
                                              ("seg", "uint8")])
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


def test_whole_tensor_ops_split_into_blocks_when_l1_is_small(tmp_path):
    """A 2000-byte L1 cannot hold the segmentation head's resize, concat or
    softmax whole: they run in blocks of channels (resize) or rows (concat,
    softmax), bit-exact."""
    def l1_2000(data):
        data["memory"]["L1"]["size"] = 2000

    out = tmp_path / "out"
    target = host_variant(tmp_path, "host_2k", l1_2000)
    path = model_yaml(tmp_path, "seg")
    scons(f"target={target}", f"model={path}", out=out, check=True)
    rep = passed(out, "host_2k", path)
    split = {layer["op"]: layer["n_tiles"] for layer in rep["layers"] if layer["op"] in ("resize", "concat", "softmax")}
    assert set(split) == {"resize", "concat", "softmax"} and min(split.values()) > 1, split


def test_whole_tensor_op_that_does_not_fit_is_one_line(tmp_path):
    """A product by a [H, W, 1] map broadcasts along channels: no blocks, so
    with 3000 bytes of L1 (its tensors need 6144) the build stops with one
    line naming the layer."""
    target = host_variant(tmp_path, "host_small", small_l1)
    path = model_yaml(tmp_path, "mul_spatial")
    line = one_error(scons(f"target={target}", f"model={path}", out=tmp_path / "out"))
    assert "layer mul" in line and "computed on whole tensors" in line and "need 6144 bytes" in line, line


def needs(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")


@pytest.mark.qemu
@pytest.mark.parametrize("kind", ["mbv3", "seg"])
@pytest.mark.parametrize("target", ["stm32h7", "gap8"])
def test_new_ops_under_qemu(tmp_path, target, kind):
    """The MobileNetV3-like block and the segmentation head (64-bit softmax
    division on both cores) under QEMU."""
    if target == "stm32h7":
        needs("arm-none-eabi-gcc", "qemu-system-arm")
    else:
        needs("riscv64-unknown-elf-gcc", "qemu-system-riscv32")
    out = tmp_path / "out"
    path = model_yaml(tmp_path, kind)
    scons(f"target={target}", f"model={path}", out=out, check=True)
    rep = passed(out, target, path)
    want = {"lut", "mul", "resize", "concat", "depthwise"} if kind == "mbv3" else {"resize", "concat", "softmax"}
    assert want <= {layer["op"] for layer in rep["layers"]}
