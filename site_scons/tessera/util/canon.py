"""Canonical JSON: the one serialization every build step reads and writes.

SCons signs a step by the bytes of its inputs, so every JSON a step reads
must be canonical: sorted keys, no insignificant whitespace differences, no
floats printed loosely (floats are written with repr, which round-trips), no
paths or times. `dumps` is for signatures and files alike.
"""

import hashlib
import json
import os
import sys
import tempfile

# the library's root (site_scons/tessera): module names below are relative to it
LIBRARY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _plain(obj):
    """Turn numpy scalars/arrays and tuples into plain JSON types."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    # numpy is not imported here (declaring a build's steps does not need
    # it): a numpy value exists only once something else has imported it
    np = sys.modules.get("numpy")
    if np is None:
        return obj
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
        os.chmod(tmp, 0o644)   # mkstemp makes 0600 files
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


def npz_bytes(arrays):
    """A deterministic .npz (np.savez stamps the current time into the zip)."""
    import io
    import zipfile

    import numpy as np

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            data = io.BytesIO()
            np.lib.format.write_array(data, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            zf.writestr(info, data.getvalue())
    return buf.getvalue()


def save_npz(path, arrays):
    write_atomic(path, npz_bytes(arrays))


def load_npz(path, names=None):
    """The arrays of an .npz file; with `names`, only those (a layer's
    step reads its own few of a network's thousand)."""
    import numpy as np

    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in (data.files if names is None else names)}


def file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_digest(*packages):
    """Digest of the Python sources of tessera sub-packages or modules: a
    step's result depends on the code that computed it."""
    root = LIBRARY
    h = hashlib.sha256()
    for f in source_files(*packages):
        h.update(os.path.relpath(f, root).encode())
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:16]


def source_files(*packages):
    """The .py files of tessera sub-packages or modules (for SCons Depends)."""
    root = LIBRARY
    files = []
    for pkg in packages:
        path = os.path.join(root, *pkg.split("."))
        if os.path.isdir(path):
            for d, _, names in os.walk(path):
                files += [os.path.join(d, n) for n in names if n.endswith(".py")]
        elif os.path.isfile(path + ".py"):
            files.append(path + ".py")
        else:
            # a step declared on code that is not there would never rerun
            raise ValueError(f"no tessera package or module {pkg!r}")
    return sorted(files)
