"""The model half of the build: model YAML -> ONNX -> IR -> golden outputs.

These steps run when SConstruct is read, not as SCons build steps, because
the rest of the build graph (one tiling, one C file, one object per layer)
is only known once the IR exists, and SCons must know every node before it
starts building. They are cached all the same: each step is keyed by the
digest of exactly what it reads (the generator parameters, the ONNX bytes,
the IR, the library code that computes it) and reruns only when that key
changes. Outputs are written atomically, the key last, so an interrupted
step never looks up to date.

A .tflite model (`tflite:`) is imported by frontend.tflite and its golden
model checked against the TFLite interpreter on every tensor
(golden.tflitecheck): tflite.json records it, a difference stops the build.

A model with `reference:` (DORY or Deeploy files) runs the golden model on
the reference's input, writes reference.json (every compared tensor: equal,
or its first difference) and fails the build with one line when the golden
model disagrees with the reference.

A standard QDQ/QOperator model is also compared with ONNX Runtime, layer by
layer (tessera.golden.ortcheck): ort_check.json holds every layer's largest
difference in LSB, and a layer more than 1 LSB off stops the build (a
warning with `ort_check: warn` in the model YAML).

Everything after this (tiling, planning, code generation, compilation, runs)
is ordinary SCons steps that read graph.json and golden.npz.
"""

import os

from ..util import canon
from ..errors import ConfigError, TesseraError
from ..ir import Graph

# The frontend (onnx), the zoo (ONNX Runtime's quantizer), the golden model
# and the references are imported where a step runs: a build whose
# preparation is up to date (a no-op) needs none of them.

PREPARE_VERSION = "2"
STANDARD_DIALECTS = ("qdq", "qoperator")


class OrtMismatch(TesseraError):
    """The golden model is more than 1 LSB from ONNX Runtime on a layer."""


def _stamp(path):
    try:
        return canon.read_json(path)
    except (OSError, ValueError):
        return None


def _fresh(stamp, step, key, paths):
    """True when `step` ran with `key` and every file it wrote still holds
    the bytes it wrote (a truncated or edited output reruns the step)."""
    if stamp.get(step) != key:
        return False
    digests = stamp.get(step + "_outputs", {})
    return all(os.path.exists(p) and digests.get(os.path.basename(p)) == canon.file_digest(p) for p in paths)


def _record(stamp, step, key, paths):
    stamp[step] = key
    stamp[step + "_outputs"] = {os.path.basename(p): canon.file_digest(p) for p in paths}


def model_onnx(model, cache_dir, log):
    """Path of the quantized ONNX for a model YAML (built by tessera.zoo and
    cached by its parameters when the model is generated)."""
    if model.get("tflite"):
        return model["tflite"]
    if model["onnx"]:
        return model["onnx"]
    key = canon.digest({"generator": model["generator"], "quantization": model["quantization"],
                        "code": canon.source_digest("zoo"), "v": PREPARE_VERSION})
    path = os.path.join(cache_dir, f"{model['name']}-{key}.onnx")
    if not os.path.exists(path):
        log(f"building model {model['name']} (float ONNX, then ONNX Runtime static quantization)")
        from .. import zoo
        try:
            zoo.build_model(model["generator"], model["quantization"], path)
        except ConfigError as err:
            raise ConfigError(f"{model['path']}: {err.where}", err.what, err.fix) from None
    return path


def source_files(model):
    """Every file the model stage reads for `model` (a loaded model YAML):
    the YAML, the given ONNX or .tflite file, the TensorProto files its
    `constants:` bind, the input's sample file (`input: {file: ...}`), the
    reference's files. A generated model is made from the YAML alone (and
    tessera's code). A build outside SCons (CMake's tessera_add_network)
    depends on these."""
    files = [model["path"]]
    given = model.get("tflite") or model.get("onnx")
    if given:
        files.append(given)
    if model.get("onnx"):
        files += _external_files(model["onnx"])
    files += [model["constants"][k] for k in sorted(model.get("constants") or {})]
    if model.get("input", {}).get("file"):
        files.append(model["input"]["file"])
    if model.get("reference"):
        from . import reference
        files += sorted(reference.load(model["reference"]).files())
    return [os.path.abspath(f) for f in files]


def _external_files(onnx_path):
    """The external-data files of an ONNX file (frontend.onnxgraph), the
    frontend imported only for a file that has some: every external-data
    entry holds the key `location`."""
    try:
        with open(onnx_path, "rb") as f:
            if b"location" not in f.read():
                return []
    except OSError:
        return []   # the import names a missing file
    from ..frontend.onnxgraph import external_files
    return external_files(onnx_path)


def golden_inputs(model, graph):
    """The input the golden model and the firmware both run on: the
    reference's input when the model has one, the user's sample
    (`input: {file: ...}`, tessera.model.sample), else seeded random values."""
    from .. import golden
    from . import reference
    if model.get("reference"):
        return reference.load(model["reference"]).golden_inputs(graph)
    if model["input"].get("file"):
        from . import sample
        return sample.load(model["input"], graph, model["path"])
    return golden.random_input(graph, model["input"]["seed"])


def _reference_key(ref):
    """What of the reference the steps read: its files' contents."""
    return {os.path.basename(f): canon.file_digest(f) for f in ref.files()}


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
    ref = None
    if model.get("reference"):
        from . import reference
        ref = reference.load(model["reference"])
    fe_data = {"onnx": canon.file_digest(onnx_path), "name": model["name"],
               **({"drop_final_softmax": True} if model.get("drop_final_softmax") else {}),
               "code": canon.source_digest("frontend", "ir"), "v": PREPARE_VERSION}
    external = _external_files(onnx_path) if model.get("onnx") else []
    if external:   # the weights an ONNX file keeps beside it: a changed file re-imports
        fe_data["external_data"] = {os.path.relpath(f, os.path.dirname(os.path.abspath(onnx_path))): canon.file_digest(f)
                                    for f in external if os.path.isfile(f)}
    input_types = None
    if ref is not None:
        # the integer dialects' graphs do not say whether an input is signed
        from .. import frontend
        input_types = ref.input_types(frontend.input_names(onnx_path))
        fe_data["input_types"] = input_types
    if model.get("input_shape"):
        fe_data["input_shape"] = model["input_shape"]
    if model.get("constants"):
        fe_data["constants"] = {k: canon.file_digest(v) for k, v in sorted(model["constants"].items())}
    fe_key = canon.digest(fe_data)
    fe_outputs = [paths["graph"], paths["weights"]]
    if not _fresh(stamp, "frontend", fe_key, fe_outputs):
        log(f"importing {os.path.basename(onnx_path)}")
        if model.get("tflite"):
            from ..frontend.tflite import import_tflite
            graph, weights = import_tflite(onnx_path, model["name"], model["drop_final_softmax"])
        else:
            from .. import frontend
            graph, weights = frontend.import_onnx(onnx_path, model["name"], input_types,
                                                  model.get("input_shape"), model.get("constants"))
        stamp = {}
        canon.write_json(paths["graph"], graph.to_json())
        canon.save_npz(paths["weights"], weights)
        _record(stamp, "frontend", fe_key, fe_outputs)
        canon.write_json(stamp_path, stamp)

    gold_data = {"graph": canon.file_digest(paths["graph"]),
                 "weights": canon.file_digest(paths["weights"]),
                 "input": {k: v for k, v in model["input"].items() if v is not None and k != "file"},
                 "reference": model["reference"],
                 **({"input_file": canon.file_digest(model["input"]["file"]),
                    "sample_code": canon.source_digest("model.sample")} if model["input"].get("file") else {}),
                 "code": canon.source_digest("golden", "ir"), "v": PREPARE_VERSION}
    wanted = ["input", "golden"]
    if ref is not None:
        paths["reference"] = os.path.join(outdir, "reference.json")
        gold_data["reference_files"] = _reference_key(ref)
        gold_data["reference_code"] = canon.source_digest("model.reference")
        wanted.append("reference")
    if model.get("tflite"):
        paths["tflite"] = os.path.join(outdir, "tflite.json")
        gold_data["tflite_code"] = canon.source_digest("golden")
        wanted.append("tflite")
    gold_key = canon.digest(gold_data)
    gold_outputs = [paths[k] for k in wanted]
    if not _fresh(stamp, "golden", gold_key, gold_outputs):
        log("running the golden model")
        from .. import golden
        graph = Graph.from_json(canon.read_json(paths["graph"]))
        weights = canon.load_npz(paths["weights"])
        inputs = golden_inputs(model, graph)
        try:
            values = golden.run(graph, weights, inputs)
        except golden.GoldenError as err:
            raise golden.GoldenError(f"{onnx_path}: {err.where}", err.what, err.fix) from None
        canon.save_npz(paths["input"], inputs)
        canon.save_npz(paths["golden"], values)
        if ref is not None:
            rows = ref.compare(graph, values)
            canon.write_json(paths["reference"], reference.verdict(model["name"], ref, rows))
            # no stamp on a disagreement: the next build checks (and fails) again
            reference.check(model["name"], ref, rows)
        if model.get("tflite"):
            log("checking every tensor against the TFLite interpreter")
            from ..golden import tflitecheck
            result = tflitecheck.compare(onnx_path, graph, values, inputs, weights)
            canon.write_json(paths["tflite"], result)
            # no stamp on a disagreement: the next build checks (and fails) again
            tflitecheck.check(model["name"], onnx_path, result)
        _record(stamp, "golden", gold_key, gold_outputs)
        canon.write_json(stamp_path, stamp)

    graph = Graph.from_json(canon.read_json(paths["graph"]))
    if graph.dialect in STANDARD_DIALECTS:
        paths["ort_check"] = os.path.join(outdir, "ort_check.json")
        ort_key = canon.digest({"golden": gold_key, "onnx": fe_data["onnx"],
                                "input_shape": model.get("input_shape"),
                                "code": canon.source_digest("golden", "frontend", "ir"), "v": PREPARE_VERSION})
        if not _fresh(stamp, "ort_check", ort_key, [paths["ort_check"]]):
            log("checking every layer against ONNX Runtime")
            canon.write_json(paths["ort_check"], ort_check(model, onnx_path, graph, paths))
            _record(stamp, "ort_check", ort_key, [paths["ort_check"]])
            canon.write_json(stamp_path, stamp)
        _ort_verdict(model, canon.read_json(paths["ort_check"]), log)
    for line in intake_lines(graph):
        log(line)
    return paths


def ort_check(model, onnx_path, graph, paths):
    """Every layer against ONNX Runtime on the golden input, each fed ORT's
    own inputs: {"layers": [{layer, max_diff, differing}], "worst": ...}
    (layers whose output the source graph does not have are not listed).
    ONNX Runtime runs the source model with its free dimensions pinned as
    the import pinned them."""
    import onnx

    from ..frontend.normalize import for_ort_check
    from ..golden.ortcheck import compare

    src = for_ort_check(onnx.load(onnx_path), onnx_path, model.get("input_shape"), model.get("constants"))
    weights = canon.load_npz(paths["weights"])
    inputs = canon.load_npz(paths["input"])
    values = canon.load_npz(paths["golden"])
    theirs = {}
    rows = compare(src, graph, weights, inputs, values, theirs)
    worst = max(rows, key=lambda r: r["max_diff"]) if rows else None
    return {"layers": rows, "worst": worst, "limit": 1, "outputs": reference_outputs(graph, theirs)}


def reference_outputs(graph, values):
    """The reference runtime's top values of each graph output it has
    (the output's own type: uint8 unshifted), for the report."""
    from ..util.top import model_values, top

    return [{"tensor": name, "top": top(model_values(graph, name, values[name]))}
            for name in graph.outputs if name in values]


def _ort_verdict(model, data, log):
    bad = [r for r in data["layers"] if r["max_diff"] > data["limit"]]
    if not bad:
        return
    first = bad[0]
    what = (f"layer {first['layer']} differs from ONNX Runtime by {first['max_diff']} LSB "
            f"({first['differing']:.1%} of its values; {len(bad)} layer(s) over 1 LSB)")
    fix = "report it with the model; `ort_check: warn` in the model YAML builds anyway"
    if model.get("ort_check") == "warn":
        log(f"warning: {model['name']}: {what}")
        return
    raise OrtMismatch(model["path"], what, fix)


def intake_lines(graph):
    """One line per thing normalization decided for the user."""
    notes = graph.notes or {}
    lines = []
    if notes.get("tflite_tail"):
        outs = ", ".join(f"{graph.tensor(n).name} ({graph.tensor(n).source_dtype}, scale {graph.tensor(n).scale:.9g}, "
                         f"zero point {graph.tensor(n).zero_point})" for n in graph.outputs
                         if graph.tensor(n).scale is not None)
        lines.append(f"{graph.name}: the post-processing after the integer network is left to the application: "
                     f"{len(notes['tflite_tail'])} operators ({', '.join(notes['tflite_tail'][:6])}"
                     f"{', ...' if len(notes['tflite_tail']) > 6 else ''}); the firmware's outputs are {outs}")
    if notes.get("stale_value_info"):
        lines.append(f"{graph.name}: {notes['stale_value_info']} shape annotation(s) of intermediate tensors "
                     "disagree with what the nodes compute: dropped, as ONNX Runtime ignores them")
    for note in notes.get("repaired", []):
        lines.append(f"{graph.name}: repaired in memory: {note}")
    if notes.get("batch_pinned"):
        lines.append(f"{graph.name}: batch pinned to 1 for input(s) {', '.join(notes['batch_pinned'])}")
    tail = notes.get("float_tail")
    if tail:
        out = graph.tensor(graph.outputs[0])
        ops = ", ".join(f"{t['op']} ({t['node']})" for t in tail)
        lines.append(f"{graph.name}: float ops after the last DequantizeLinear left to the application: {ops}; "
                     f"the firmware's output is the {out.source_dtype} tensor {out.name} "
                     f"(scale {out.scale:.9g}, zero point {out.zero_point})")
    return lines
