"""The sweep file: models, targets, axes over target values and build
variables, what to run. Loaded into plain data and expanded into points.

    name: gap8_memory
    models: [mbv1_025_128, dscnn_kws]
    targets: [gap8]                      # bundled names or YAML paths
    axes:
      memory.L1.size: [32000, 64000]     # any numeric field of the target YAML (dotted path;
      memory.L2.size: [256000, 512000]   #   a list entry by its name: dma.cluster_dma.bandwidth)
      fusion: [none, min_latency]        # a build variable
    variables: {tile_cost: model}        # fixed build variables (optional)
    run: true                            # build and run (false: tiling and plan only, with --estimate)
    latency: 60000000                    # optional: smallest memories reaching this count
    tolerance: 0.1                       # optional: |estimate - measured| / measured flagged beyond this
"""

import itertools
import os

import yaml

from .. import config
from ..errors import ConfigError
from ..util import canon, paths

# the build's variables a sweep may vary (SConstruct's Variables, less the
# ones that say where or how loudly)
BUILD_VARIABLES = ("fusion", "fusion_cost", "overlap", "direct", "ram_cap", "tile_cost", "guard", "cmsis_nn")
KEYS = ("name", "description", "models", "targets", "axes", "variables", "run", "latency", "tolerance", "timeout")


def _list(path, spec, key, kind):
    value = spec.get(key)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(path, f"{key}: give a list of {kind}", f"e.g. {key}: [{'gap8' if kind == 'targets' else 'tiny'}]")
    return value


def load(path):
    """The sweep file as plain data (targets and models resolved to their
    YAML files, relative paths from the sweep file's folder), checked: a
    mistake is one ConfigError naming the file, the key and the fix."""
    path = os.path.abspath(os.fspath(path))
    try:
        with open(path) as f:
            spec = yaml.safe_load(f)
    except OSError as err:
        raise ConfigError(path, f"cannot read the sweep file ({err.strerror})", "give the path of a sweep YAML") from None
    except yaml.YAMLError as err:
        raise ConfigError(path, f"not valid YAML ({str(err).splitlines()[0]})", "fix the YAML syntax") from None
    if not isinstance(spec, dict):
        raise ConfigError(path, "a sweep file is a mapping", "give models:, targets: and axes: (docs/sweeps.md)")
    unknown = sorted(set(spec) - set(KEYS))
    if unknown:
        raise ConfigError(path, f"{unknown[0]}: unknown key", f"known: {', '.join(KEYS)}")
    here = os.path.dirname(path)

    def resolve(kind, value):
        if value.endswith((".yaml", ".yml")) or os.sep in value:
            value = os.path.join(here, value)
        try:
            return config.resolve(kind, value, paths.DATA)
        except ConfigError as err:
            raise ConfigError(path, f"{kind}s: {err}") from None

    models = [resolve("model", m) for m in _list(path, spec, "models", "models")]
    targets = [resolve("target", t) for t in _list(path, spec, "targets", "targets")]
    raw = {name: read_yaml(tpath) for name, tpath in targets}
    axes = spec.get("axes") or {}
    if not isinstance(axes, dict):
        raise ConfigError(path, "axes: a mapping of a target field or build variable to its values",
                          "e.g. axes: {memory.L1.size: [32000, 64000]}")
    out_axes = []
    for key, values in axes.items():
        key = str(key)
        if not isinstance(values, list) or not values:
            raise ConfigError(path, f"axes: {key}: give a list of values", f"e.g. {key}: [1, 2]")
        if len(set(map(str, values))) != len(values):
            raise ConfigError(path, f"axes: {key}: a value appears twice", "list each value once")
        if key in BUILD_VARIABLES:
            out_axes.append({"key": key, "kind": "variable", "values": [str(v) for v in values]})
            continue
        for name, tree in raw.items():
            old = field(tree, key)
            if old is None or isinstance(old, bool) or not isinstance(old, (int, float)):
                raise ConfigError(path, f"axes: {key}: not a numeric field of target {name}",
                                  f"a dotted path to a number in the target YAML (memory.L1.size, cores, "
                                  f"dma.<engine name>.bandwidth) or a build variable ({', '.join(BUILD_VARIABLES)})")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            raise ConfigError(path, f"axes: {key}: a target field takes numbers", f"e.g. {key}: [32000, 64000]")
        out_axes.append({"key": key, "kind": "target", "values": values})
    variables = spec.get("variables") or {}
    if not isinstance(variables, dict) or sorted(set(variables) - set(BUILD_VARIABLES)):
        bad = sorted(set(variables) - set(BUILD_VARIABLES)) if isinstance(variables, dict) else ["variables"]
        raise ConfigError(path, f"variables: {bad[0]}: not a build variable a sweep sets",
                          f"known: {', '.join(BUILD_VARIABLES)}")
    clash = sorted(set(variables) & {a["key"] for a in out_axes})
    if clash:
        raise ConfigError(path, f"{clash[0]}: both an axis and a fixed variable", "keep one")
    latency = spec.get("latency")
    if latency is not None and (isinstance(latency, bool) or not isinstance(latency, (int, float)) or latency <= 0):
        raise ConfigError(path, f"latency: {latency!r}: not a positive count",
                          "the instructions or cycles a network must reach, e.g. latency: 60000000")
    tolerance = spec.get("tolerance", 0.1)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance <= 0:
        raise ConfigError(path, f"tolerance: {tolerance!r}: not a positive fraction", "e.g. tolerance: 0.1")
    return {"file": path, "name": str(spec.get("name") or os.path.splitext(os.path.basename(path))[0]),
            "description": str(spec.get("description", "")),
            "models": [{"name": n, "path": p} for n, p in models],
            "targets": [{"name": n, "path": p} for n, p in targets],
            "axes": out_axes, "variables": {k: str(v) for k, v in variables.items()},
            "run": bool(spec.get("run", True)), "latency": latency, "tolerance": float(tolerance),
            "timeout": spec.get("timeout")}


def read_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f)


def _step(node, part):
    """The child of a YAML node: a mapping's key, a list's index or the
    entry whose `name` is `part`."""
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list):
        if part.isdigit() and int(part) < len(node):
            return node[int(part)]
        for item in node:
            if isinstance(item, dict) and item.get("name") == part:
                return item
    return None


def field(tree, key):
    """The value at a dotted path of a target's YAML tree (None: no such field)."""
    node = tree
    for part in key.split("."):
        node = _step(node, part)
        if node is None:
            return None
    return node


def set_field(tree, key, value):
    parts = key.split(".")
    parent = field(tree, ".".join(parts[:-1])) if len(parts) > 1 else tree
    if isinstance(parent, dict):
        parent[parts[-1]] = value
    else:
        parent[int(parts[-1])] = value


def short(key):
    """A target field's short name in derived target names: memory.L1.size -> L1."""
    parts = [p for p in key.split(".") if p not in ("memory", "size")]
    return "_".join(parts) or key.replace(".", "_")


def _value_word(v):
    return str(v).replace(".", "p").replace("-", "m")


def target_name(base, overrides):
    """The derived target's name: its base and its overridden values, in the
    axes' order (gap8_L1_32000_L2_256000); the base itself without any."""
    return "_".join([base] + [f"{short(k)}_{_value_word(v)}" for k, v in overrides])


def expand(spec):
    """Every point of the sweep, in a fixed order (models, then targets, then
    the axes' product in the file's order): dicts with `id`, `folder`
    (relative to the sweep's output), `model`, `target` (base name and
    path), `overrides` [(field, value)], `target_name` and `variables`."""
    out = []
    for model in spec["models"]:
        for target in spec["targets"]:
            for combo in itertools.product(*[a["values"] for a in spec["axes"]]):
                overrides = [(a["key"], v) for a, v in zip(spec["axes"], combo) if a["kind"] == "target"]
                variables = dict(spec["variables"])
                variables.update({a["key"]: v for a, v in zip(spec["axes"], combo) if a["kind"] == "variable"})
                tname = target_name(target["name"], overrides)
                vword = "".join(f"+{k}={v}" for k, v in sorted(variables.items()))
                folder = f"{model['name']}/{tname}" + "".join(f"__{k}-{_value_word(v)}"
                                                               for k, v in sorted(variables.items()))
                out.append({"id": f"{model['name']}@{tname}{vword}", "folder": folder,
                            "model": model["name"], "model_path": model["path"],
                            "target": target["name"], "target_path": target["path"],
                            "overrides": overrides, "target_name": tname, "variables": variables,
                            "run": spec["run"], "timeout": spec["timeout"]})
    ids = [p["id"] for p in out]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(spec["file"], f"point {dup} appears twice", "list each model and target once")
    return out


def derived_target(point):
    """(file name, text) of the point's target YAML: the base YAML with the
    point's values set, byte-identical for the same point; None without
    overrides (the base target is built as it is)."""
    if not point["overrides"]:
        return None
    tree = read_yaml(point["target_path"])
    what = ", ".join(f"{k}={v}" for k, v in point["overrides"])
    for key, value in point["overrides"]:
        set_field(tree, key, value)
    base_desc = tree.get("description", point["target"])
    tree["description"] = f"{base_desc} [sweep point: {what}]"
    head = (f"# derived by tessera sweep from {point['target']}.yaml: {what}\n"
            f"# (generated; edit the sweep file or the base target, not this file)\n")
    return point["target_name"] + ".yaml", head + yaml.safe_dump(tree, sort_keys=False, width=100)


def digest(point):
    """What a point's result depends on, besides the code: used to tell a
    stale result file from a done one."""
    text = derived_target(point)
    return canon.digest({"id": point["id"], "target": text[1] if text else point["target"],
                         "variables": point["variables"], "run": point["run"]})
