"""Canonical JSON: the one serialization every build step reads and writes.

SCons signs a step by the bytes of its inputs, so every JSON a step reads
must be canonical: sorted keys, no insignificant whitespace differences, no
floats printed loosely (floats are written with repr, which round-trips), no
paths or times. `dumps` is for signatures and files alike.
"""

import hashlib
import json
import os
import tempfile

import numpy as np


def _plain(obj):
    """Turn numpy scalars/arrays and tuples into plain JSON types."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def dumps(obj, indent=None):
    """Canonical JSON text for obj (sorted keys, fixed separators)."""
    if indent is None:
        return json.dumps(_plain(obj), sort_keys=True, separators=(",", ":"))
    return json.dumps(_plain(obj), sort_keys=True, indent=indent) + "\n"


def digest(obj):
    """Short stable digest of obj's canonical JSON."""
    return hashlib.sha256(dumps(obj).encode()).hexdigest()[:16]


def write_atomic(path, data):
    """Write bytes or text to path via a temporary file and rename.

    A step interrupted half-way must not leave a file a later build takes as
    up to date.
    """
    if isinstance(data, str):
        data = data.encode()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path, obj):
    """Write obj as indented canonical JSON (readable, diffable, stable)."""
    write_atomic(path, dumps(obj, indent=1))


def read_json(path):
    with open(path) as f:
        return json.load(f)
