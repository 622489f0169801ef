"""Validation of the `generator` and `quantization` dictionaries.

Both come straight from a model YAML; every mistake raises ConfigError with
`where` = "generator.<key>" or "quantization.<key>" (the caller prefixes the
file name). The result is a complete dict with defaults filled in, which is
also what gets recorded in the model's metadata.
"""

import numbers

from tessera.errors import ConfigError

from .archs import BUILDERS

ARCHITECTURES = tuple(BUILDERS)

GENERATOR_KEYS = ("arch", "width", "resolution", "channels", "classes", "seed", "scale_head")
QUANTIZATION_KEYS = ("calibration_samples", "seed", "per_channel")


def _int(where, value, minimum):
    # bool is an int subclass; `classes: true` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(where, f"must be an integer, not {value!r}")
    if value < minimum:
        raise ConfigError(where, f"must be at least {minimum}, not {value}")
    return int(value)


def _mapping(where, value, keys):
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ConfigError(where, f"must be a mapping, not {type(value).__name__}")
    for key in value:
        if key not in keys:
            raise ConfigError(f"{where}.{key}", "unknown key", f"known keys: {', '.join(keys)}")
    return value


def generator_params(generator):
    """Validated generator parameters with the architecture's defaults."""
    g = _mapping("generator", generator, GENERATOR_KEYS)
    if "arch" not in g:
        raise ConfigError("generator.arch", "missing", f"one of: {', '.join(ARCHITECTURES)}")
    arch = g["arch"]
    if arch not in BUILDERS:
        raise ConfigError("generator.arch", f"unknown architecture {arch!r}", f"one of: {', '.join(ARCHITECTURES)}")
    defaults = BUILDERS[arch][1]
    p = {"arch": arch}

    width = g.get("width", 1.0)
    if isinstance(width, bool) or not isinstance(width, numbers.Real) or not width > 0:
        raise ConfigError("generator.width", f"must be a positive number, not {width!r}")
    p["width"] = float(width)

    res = g.get("resolution", defaults["resolution"])
    if isinstance(res, (list, tuple)):
        if len(res) != 2:
            raise ConfigError("generator.resolution", f"must be an integer or [H, W], not {res!r}")
        p["resolution"] = [_int("generator.resolution", r, 1) for r in res]
    else:
        r = _int("generator.resolution", res, 1)
        p["resolution"] = [r, r]

    p["channels"] = _int("generator.channels", g.get("channels", defaults["channels"]), 1)
    p["classes"] = _int("generator.classes", g.get("classes", defaults["classes"]), 1)
    p["seed"] = _int("generator.seed", g.get("seed", 0), 0)
    if g.get("scale_head") is not None:
        # (only when given: the parameters of every other model, and so their
        # cached files, stay as they were)
        if arch != "mobilenet_v2" or not isinstance(g["scale_head"], bool):
            raise ConfigError("generator.scale_head", f"true or false, for mobilenet_v2 only, not {g['scale_head']!r}")
        p["scale_head"] = g["scale_head"]
    return p


def quantization_params(quantization):
    """Validated quantization parameters with defaults."""
    q = _mapping("quantization", quantization, QUANTIZATION_KEYS)
    p = {
        "calibration_samples": _int("quantization.calibration_samples", q.get("calibration_samples", 8), 1),
        "seed": _int("quantization.seed", q.get("seed", 0), 0),
    }
    per_channel = q.get("per_channel", True)
    if not isinstance(per_channel, bool):
        raise ConfigError("quantization.per_channel", f"must be true or false, not {per_channel!r}")
    p["per_channel"] = per_channel
    return p
