"""Model YAML: which network, and where its golden input comes from.

Either `onnx:` names a user's quantized ONNX file (relative to the YAML
file), or `tflite:` an int8 TFLite flatbuffer (checked against the TFLite
interpreter when the model is prepared), or `generator:` asks tessera.zoo to build a float network and quantize
it with ONNX Runtime, as a user would.

`reference: {kind: dory | deeploy, dir: ...}` (with `onnx:`) points at the
files another toolchain ships with the network (DORY's input.txt and
out_layerN.txt, Deeploy's inputs.npz and outputs.npz): the golden model then
runs on that input and must reproduce those outputs bit for bit
(tessera.model.reference).
"""

import os

from ..errors import ConfigError
from .schema import Field, validate
from .yamlio import load_yaml

GENERATOR = Field("map", fields={
    "arch": Field("str", "mobilenet_v1 | mobilenet_v2 | dscnn | tiny", required=True),
    "width": Field("number", "width multiplier", default=1.0, minimum=0.01),
    "resolution": Field("any", "input size: N or [H, W]", required=True),
    "channels": Field("int", "input channels", default=3, minimum=1),
    "classes": Field("int", "output classes", required=True, minimum=1),
    "seed": Field("int", "weight seed", default=0, minimum=0),
    "scale_head": Field("bool", "mobilenet_v2: its last 1x1 convolution scaled by the width too (TF-slim's default)"),
})

QUANTIZATION = Field("map", fields={
    "calibration_samples": Field("int", "seeded random calibration inputs", default=8, minimum=1),
    "seed": Field("int", "calibration seed", default=0, minimum=0),
    "per_channel": Field("bool", "per-channel weight scales", default=True),
})

REFERENCE = Field("map", fields={
    "kind": Field("str", "dory | deeploy", required=True, choices=("dory", "deeploy")),
    "dir": Field("str", "folder with the reference files (relative to this YAML)", required=True),
})

INPUT = Field("map", fields={
    "seed": Field("int", "seed of the random golden input", default=0, minimum=0),
    "file": Field("str", "a sample to run instead (relative to this YAML): .npy, .npz, an image (.png, .jpg, "
                  ".bmp, ...) or raw quantized bytes (tessera.model.sample)"),
    "range": Field("any", "an image: the real values of pixels 0 and 255, [low, high] (default [0, 1]), "
                   "quantized with the input's scale and zero point"),
})

MODEL = Field("map", fields={
    "description": Field("str", "one line shown by `scons -h`", required=True),
    "onnx": Field("str", "a quantized ONNX file (relative to this YAML)"),
    "tflite": Field("str", "an int8 .tflite file (relative to this YAML)"),
    "drop_final_softmax": Field("bool", "tflite: end the network at the final SOFTMAX's input (the logits)",
                                default=False),
    "generator": GENERATOR,
    "quantization": QUANTIZATION,
    "input": INPUT,
    "reference": REFERENCE,
    "constants": Field("dict", "graph inputs that are parameters (scales, zero points: ONNX's QLinearConv "
                       "test), each fixed to the value in an ONNX TensorProto file (.pb, relative to this YAML)",
                       values=Field("str", nonblank=True)),
    "input_shape": Field("any", "free input dimensions: [N, C, H, W] (one input) or {input name: dims}; "
                         "a free batch is pinned to 1 without it"),
    "ort_check": Field("str", "a layer more than 1 LSB from ONNX Runtime stops the build (error) "
                       "or only warns (warn)", default="error", choices=("error", "warn")),
    # no default here: unset, the target YAML's fusion: applies, else
    # min_latency (tessera_scons resolves command line > model > target)
    "fusion": Field("str", "fusion selector policy (the command line's fusion= overrides it; unset: the target "
                    "YAML's fusion:, else min_latency): none (every layer its own step), min_latency (fuse the "
                    "DW->PW and PW->DW pairs estimated faster), min_transfer (fuse the pairs that move fewer "
                    "activation bytes) or min_memory (fuse only the pairs that lower the activation peak)",
                    choices=("none", "min_latency", "min_transfer", "min_memory")),
    "fusion_cost": Field("str", "what min_latency compares (the command line's fusion_cost= overrides it; unset: "
                         "the target YAML's fusion_cost:, else model): model (the calibrated cost model) or "
                         "measured (the variants built and run)", choices=("model", "measured")),
    "fusion_pw_dw": Field("str", "the fused PW->DW steps' layout: auto (channel-wise when it fits L1, else "
                          "row-wise with the shifted buffer), rows (row-wise when it fits) or channels",
                          default="auto", choices=("auto", "rows", "channels")),
    "ram_cap": Field("int", "the firmware's total RAM (activations, tile arena, reserved bytes) at most this "
                     "many bytes: the tile budget is the largest that fits (ram_cap= on the command line wins)",
                     minimum=1),
    "note": Field("str", default=""),
})



def _given_file(model, key, base, path):
    """A model given as a file (`onnx:` or `tflite:`, relative to the YAML):
    no generator, the path made absolute and checked to exist."""
    model["generator"] = None
    model["quantization"] = None
    model[key] = os.path.normpath(os.path.join(base, model[key]))
    if not os.path.isfile(model[key]):
        raise ConfigError(path, f"{key}: file not found: {model[key]}", "the path is relative to the model YAML")

def _input_shape(value, path):
    """{input name or "*": [dims]} from the YAML's list or mapping."""
    def dims(v, key):
        if (isinstance(v, list) and v
                and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in v)):
            return list(v)
        raise ConfigError(path, f"{key}: expected a list of positive integers, got {v!r}",
                          "e.g. input_shape: [1, 3, 96, 96]")
    if isinstance(value, list):
        return {"*": dims(value, "input_shape")}
    if isinstance(value, dict) and value:
        return {str(k): dims(v, f"input_shape.{k}") for k, v in value.items()}
    raise ConfigError(path, f"input_shape: expected a list of dimensions or a mapping, got {value!r}",
                      "e.g. input_shape: [1, 3, 96, 96]")


def _constant_file(base, value, key, path):
    full = os.path.normpath(os.path.join(base, value))
    if not os.path.isfile(full):
        raise ConfigError(path, f"constants.{key}: file not found: {full}", "the path is relative to the model YAML")
    return full


def _resolution(value, path):
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return [value, value]
    if (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
        return list(value)
    raise ConfigError(path, f"generator.resolution: expected a positive integer or [H, W], got {value!r}")


def parse_model(data, path, name):
    has_onnx = "onnx" in data
    has_gen = "generator" in data
    has_tflite = "tflite" in data
    model = validate(data, MODEL, path)
    if has_onnx + has_gen + has_tflite != 1:
        raise ConfigError(path, "give exactly one of `onnx:` (your quantized file), `tflite:` (an int8 "
                          ".tflite file) or `generator:`", "see models/tiny.yaml and the README")
    base = os.path.dirname(os.path.abspath(path))
    if model["input"].get("file") is not None:
        sample = os.path.normpath(os.path.join(base, model["input"]["file"]))
        if not os.path.isfile(sample):
            raise ConfigError(path, f"input.file: file not found: {sample}", "the path is relative to the model YAML")
        if model["reference"] is not None:
            raise ConfigError(path, "input.file: the reference's own input is the golden input",
                              "drop input.file, or the reference")
        model["input"] = dict(model["input"], file=sample)
    if has_tflite:
        if model["reference"] is not None:
            raise ConfigError(path, "reference: is for DORY/Deeploy ONNX graphs",
                              "a .tflite model is checked against the TFLite interpreter itself")
        if model["input_shape"] is not None:
            raise ConfigError(path, "input_shape: applies to a given `onnx:` file",
                              "a .tflite model has fixed shapes")
        if model["constants"] is not None:
            raise ConfigError(path, "constants: binds graph inputs of a given `onnx:` file",
                              "a .tflite model has no parameter inputs")
        model["onnx"] = None
        _given_file(model, "tflite", base, path)
        model["name"] = name
        model["path"] = path
        return model
    if has_onnx:
        _given_file(model, "onnx", base, path)
    else:
        model["generator"]["resolution"] = _resolution(model["generator"]["resolution"], path)
        if model["generator"]["scale_head"] is None:
            # not given: the generator's parameters (and so the digest of every
            # other model's files) as they were before the key existed
            del model["generator"]["scale_head"]
    if model["reference"] is not None:
        if not has_onnx:
            raise ConfigError(path, "reference: compares a given network with its reference outputs",
                              "use it with `onnx:` (the network the reference files belong to)")
        model["reference"]["dir"] = os.path.normpath(os.path.join(base, model["reference"]["dir"]))
        if not os.path.isdir(model["reference"]["dir"]):
            raise ConfigError(path, f"reference.dir: folder not found: {model['reference']['dir']}")
    if model["constants"] is not None:
        if not has_onnx:
            raise ConfigError(path, "constants: binds graph inputs of a given `onnx:` file",
                              "generated models have no parameter inputs")
        model["constants"] = {str(k): _constant_file(base, v, k, path) for k, v in model["constants"].items()}
    if model["input_shape"] is not None:
        if not has_onnx:
            raise ConfigError(path, "input_shape: applies to a given `onnx:` file",
                              "generated models have fixed shapes")
        model["input_shape"] = _input_shape(model["input_shape"], path)
    model["name"] = name
    model["path"] = path
    return model


def load_model(path, name):
    return parse_model(load_yaml(path), path, name)
