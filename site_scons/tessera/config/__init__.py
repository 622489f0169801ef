"""Loading and validating the target and model YAML files.

`resolve(kind, value, root)` turns a command-line value (a name in
targets/ or models/, or a path to a YAML file elsewhere) into (name, path).
"""

import os

from ..errors import ConfigError
from .cli import check_arguments
from .model import load_model, parse_model
from .target import isa_defines, load_target, parse_target, usable_bytes
from .yamlio import load_yaml


def output_dir(path):
    """The absolute output directory out= names, checked before anything is
    written there: one line naming out= for an empty value, a `$` (SCons
    would expand it), a file, or a place no directory can be made."""
    if not path or not path.strip():
        raise ConfigError("out=", "empty", "give a directory; without out= it is generated/ in the checkout")
    if "$" in path:
        raise ConfigError(f"out={path}", "contains `$`, which SCons would expand",
                          "choose a directory name without `$`")
    full = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(full) and not os.path.isdir(full):
        raise ConfigError(f"out={path}", "is a file, not a directory", "give a directory")
    try:
        os.makedirs(full, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"out={path}", f"cannot create the directory: {err.strerror}",
                          "give a writable directory") from None
    return full

__all__ = ["check_arguments", "output_dir", "ConfigError", "resolve", "available", "load_target", "load_model", "parse_target",
           "parse_model", "usable_bytes", "load_yaml", "describe_all"]

FOLDERS = {"target": "targets", "model": "models"}


def available(kind, root):
    """Names of the bundled targets or models, sorted."""
    folder = os.path.join(root, FOLDERS[kind])
    if not os.path.isdir(folder):
        return []
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))


def resolve(kind, value, root):
    """(name, absolute path) for `target=` / `model=` values."""
    if not value:
        raise ConfigError(f"{kind}=", "missing", f"choose one of: {', '.join(available(kind, root))}")
    if value.endswith((".yaml", ".yml")) or os.sep in value:
        path = os.path.abspath(value)
        if not os.path.isfile(path):
            raise ConfigError(f"{kind}={value}", "file not found")
        name = os.path.splitext(os.path.basename(path))[0]
        return name, path
    names = available(kind, root)
    if value not in names:
        raise ConfigError(f"{kind}={value}", f"unknown {kind}",
                          f"choose one of: {', '.join(names)}, or give a path to a YAML file")
    return value, os.path.join(root, FOLDERS[kind], value + ".yaml")


def describe_all(kind, root):
    """[(name, description)] of the bundled targets or models; a file that
    does not load shows its error instead of hiding the others."""
    rows = []
    for name in available(kind, root):
        path = os.path.join(root, FOLDERS[kind], name + ".yaml")
        try:
            desc = load_yaml(path).get("description", "")
        except ConfigError as err:
            desc = f"(invalid: {err})"
        rows.append((name, str(desc)))
    return rows
