"""The model half of the build: model YAML -> ONNX -> IR -> golden outputs.

These steps run when SConstruct is read, not as SCons build steps, because
the rest of the build graph (one tiling, one C file, one object per layer)
is only known once the IR exists, and SCons must know every node before it
starts building. They are cached all the same: each step is keyed by the
digest of exactly what it reads (the generator parameters, the ONNX bytes,
the IR, the library code that computes it) and reruns only when that key
changes. Outputs are written atomically, the key last, so an interrupted
step never looks up to date.

Everything after this (tiling, planning, code generation, compilation, runs)
is ordinary SCons steps that read graph.json and golden.npz.
"""

import os

from . import canon, frontend, golden, zoo
from .errors import ConfigError
from .ir import Graph

PREPARE_VERSION = "1"


def _stamp(path):
    try:
        return canon.read_json(path)
    except (OSError, ValueError):
        return None


def model_onnx(model, cache_dir, log):
    """Path of the quantized ONNX for a model YAML (built by tessera.zoo and
    cached by its parameters when the model is generated)."""
    if model["onnx"]:
        return model["onnx"]
    key = canon.digest({"generator": model["generator"], "quantization": model["quantization"],
                        "code": canon.source_digest("zoo"), "v": PREPARE_VERSION})
    path = os.path.join(cache_dir, f"{model['name']}-{key}.onnx")
    if not os.path.exists(path):
        log(f"building model {model['name']} (float ONNX, then ONNX Runtime static quantization)")
        try:
            zoo.build_model(model["generator"], model["quantization"], path)
        except ConfigError as err:
            raise ConfigError(f"{model['path']}: {err.where}", err.what, err.fix) from None
    return path


def golden_inputs(model, graph):
    """The input the golden model and the firmware both run on."""
    return golden.random_input(graph, model["input"]["seed"])


def prepare(model, outdir, cache_dir, log=print):
    """Bring outdir's graph.json, weights.npz, input.npz and golden.npz up
    to date for `model` (a loaded model YAML). Returns their paths."""
    os.makedirs(outdir, exist_ok=True)
    paths = {k: os.path.join(outdir, f) for k, f in (
        ("graph", "graph.json"), ("weights", "weights.npz"),
        ("input", "input.npz"), ("golden", "golden.npz"))}
    stamp_path = os.path.join(outdir, ".prepare.json")
    stamp = _stamp(stamp_path) or {}

    onnx_path = model_onnx(model, cache_dir, log)
    paths["onnx"] = onnx_path
    fe_key = canon.digest({"onnx": canon.file_digest(onnx_path), "name": model["name"],
                           "code": canon.source_digest("frontend", "ir"), "v": PREPARE_VERSION})
    if stamp.get("frontend") != fe_key or not all(os.path.exists(paths[k]) for k in ("graph", "weights")):
        log(f"importing {os.path.basename(onnx_path)}")
        graph, weights = frontend.import_onnx(onnx_path, model["name"])
        stamp = {}
        canon.write_json(paths["graph"], graph.to_json())
        canon.save_npz(paths["weights"], weights)
        stamp["frontend"] = fe_key
        canon.write_json(stamp_path, stamp)

    gold_key = canon.digest({"graph": canon.file_digest(paths["graph"]),
                             "weights": canon.file_digest(paths["weights"]),
                             "input": model["input"], "reference": model["reference"],
                             "code": canon.source_digest("golden", "ir"), "v": PREPARE_VERSION})
    if stamp.get("golden") != gold_key or not all(os.path.exists(paths[k]) for k in ("input", "golden")):
        log("running the golden model")
        graph = Graph.from_json(canon.read_json(paths["graph"]))
        weights = canon.load_npz(paths["weights"])
        inputs = golden_inputs(model, graph)
        values = golden.run(graph, weights, inputs)
        canon.save_npz(paths["input"], inputs)
        canon.save_npz(paths["golden"], values)
        stamp["golden"] = gold_key
        canon.write_json(stamp_path, stamp)
    return paths
