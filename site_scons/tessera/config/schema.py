"""A small declarative schema for the target and model YAML files.

Why not jsonschema: the errors must be one line naming the file, the key path
and the fix, and the schemas double as the documentation `scons -h` and the
README show. A schema is a tree of Field objects; `validate` walks the data
and returns a plain dict with defaults filled in.
"""

import math
import reprlib

from ..errors import ConfigError

# a value shown in a message is cut short: an alias bomb or a long list
# must not become a megabyte-long error line
_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = _short.maxdict = _short.maxtuple = 4
_short.maxlevel = 2


class Field:
    """One key of a mapping.

    kind: "int", "number", "str", "bool", "list", "map" (fixed keys given by
          `fields`), "dict" (free keys, values checked by `values`), "any".
    """

    def __init__(self, kind, doc="", required=False, default=None, fields=None,
                 values=None, items=None, choices=None, minimum=None, maximum=None,
                 check=None, nonblank=False):
        self.kind = kind
        self.doc = doc
        self.required = required
        self.default = default
        self.fields = fields or {}
        self.values = values
        self.items = items
        self.choices = choices
        self.minimum = minimum
        self.maximum = maximum
        self.check = check  # callable(value) -> error text or None
        self.nonblank = nonblank  # a string that must hold more than spaces


def _type_name(value):
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _fail(path, key, what, fix=None):
    raise ConfigError(f"{path}: {key}" if key else path, what, fix)


def validate(data, field, path, key=""):
    """Check `data` against `field`; return it with defaults filled in.

    path: the YAML file (for messages); key: dotted key path inside it.
    """
    kind = field.kind
    if kind == "any":
        return data
    if kind == "int":
        if isinstance(data, bool) or not isinstance(data, int):
            _fail(path, key, f"expected an integer, got {_type_name(data)} {_short.repr(data)}")
    elif kind == "number":
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            _fail(path, key, f"expected a number, got {_type_name(data)} {_short.repr(data)}")
        if not math.isfinite(data):
            _fail(path, key, f"expected a finite number, got {data}")
    elif kind == "str":
        if not isinstance(data, str):
            _fail(path, key, f"expected a string, got {_type_name(data)} {_short.repr(data)}")
        if field.nonblank and not data.strip():
            _fail(path, key, "empty", field.doc or None)
    elif kind == "bool":
        if not isinstance(data, bool):
            _fail(path, key, f"expected true or false, got {_type_name(data)} {_short.repr(data)}")
    elif kind == "list":
        if not isinstance(data, list):
            _fail(path, key, f"expected a list, got {_type_name(data)} {_short.repr(data)}")
        if field.items is not None:
            data = [validate(v, field.items, path, f"{key}[{i}]") for i, v in enumerate(data)]
    elif kind == "map":
        data = _validate_map(data, field, path, key)
    elif kind == "dict":
        if not isinstance(data, dict):
            _fail(path, key, f"expected a mapping, got {_type_name(data)} {_short.repr(data)}")
        if field.values is not None:
            data = {k: validate(v, field.values, path, f"{key}.{k}" if key else str(k))
                    for k, v in data.items()}
    if field.choices is not None and data not in field.choices:
        _fail(path, key, f"{_short.repr(data)} is not one of {', '.join(map(str, field.choices))}")
    if field.minimum is not None and data < field.minimum:
        _fail(path, key, f"must be at least {field.minimum}, got {data}")
    if field.maximum is not None and data > field.maximum:
        _fail(path, key, f"must be at most {field.maximum}, got {data}")
    if field.check is not None:
        problem = field.check(data)
        if problem:
            _fail(path, key, problem)
    return data


def _validate_map(data, field, path, key):
    if data is None:
        data = {}
    if not isinstance(data, dict):
        _fail(path, key, f"expected a mapping, got {_type_name(data)} {_short.repr(data)}")
    out = {}
    for name in data:
        if name not in field.fields:
            known = ", ".join(sorted(field.fields))
            where = f"{key}.{name}" if key else str(name)
            _fail(path, where, "unknown key", f"known keys here: {known}")
    for name, sub in field.fields.items():
        where = f"{key}.{name}" if key else name
        if name in data:
            out[name] = validate(data[name], sub, path, where)
        elif sub.required:
            _fail(path, where, "missing required key", sub.doc or None)
        elif sub.kind == "map" and not any(f.required for f in sub.fields.values()):
            out[name] = validate(sub.default, sub, path, where)   # all defaults
        else:
            out[name] = sub.default
    return out


def describe(field, indent=0):
    """Human-readable outline of a schema (for docs and `scons -h`)."""
    lines = []
    for name, sub in field.fields.items():
        req = " (required)" if sub.required else ""
        lines.append(f"{'  ' * indent}{name}: {sub.kind}{req}  {sub.doc}".rstrip())
        if sub.kind == "map":
            lines.extend(describe(sub, indent + 1))
        elif sub.kind == "dict" and sub.values is not None and sub.values.kind == "map":
            lines.append(f"{'  ' * (indent + 1)}<name>:")
            lines.extend(describe(sub.values, indent + 2))
    return lines
