"""DORY's reference files: input.txt and out_layerN.txt.

Each file is a header line `# name (shape [H, W, C]),\\` then one value per
line followed by `,\\`, in HWC order (source values: uint8 activations as
0..255, the last layer's int32 accumulators as they are). Some files repeat
their block (header and values) twice; the first block is the data.
"""

import os
import re

import numpy as np

from ..errors import TesseraError

_HEADER = re.compile(r"#\s*(?P<name>.*?)\s*\(shape\s*\[(?P<shape>[^\]]*)\]\)")


def read_txt(path):
    """(name, shape list, int64 values) of the first block of a DORY text file."""
    try:
        with open(path) as f:
            lines = [ln.strip() for ln in f]
    except OSError as err:
        raise TesseraError(path, f"cannot read ({err.strerror})") from None
    name, shape, values = None, None, []
    for i, line in enumerate(lines):
        if not line:
            continue
        if line.startswith("#"):
            if name is not None:
                break                      # a repeated block
            m = _HEADER.match(line)
            if not m:
                raise TesseraError(f"{path}:{i + 1}", "header is not `# name (shape [...]),\\`")
            name = m.group("name")
            shape = [int(d) for d in m.group("shape").split(",") if d.strip()]
            continue
        text = line.rstrip("\\").rstrip().rstrip(",")
        try:
            v = float(text)
        except ValueError:
            raise TesseraError(f"{path}:{i + 1}", f"not a number: {line!r}") from None
        if v != int(v):
            raise TesseraError(f"{path}:{i + 1}", f"not an integer: {line!r}")
        values.append(int(v))
    if name is None:
        raise TesseraError(path, "no `# name (shape [...])` header")
    values = np.asarray(values, dtype=np.int64)
    if shape and int(np.prod(shape)) != values.size:
        raise TesseraError(path, f"header shape {shape} but {values.size} values")
    return name, shape, values


def layer_files(folder):
    """[(N, path)] of out_layerN.txt, by N."""
    out = []
    for f in os.listdir(folder):
        m = re.fullmatch(r"out_layer(\d+)\.txt", f)
        if m:
            out.append((int(m.group(1)), os.path.join(folder, f)))
    out.sort()
    if [n for n, _ in out] != list(range(len(out))):
        raise TesseraError(folder, f"out_layer files are not numbered 0..{len(out) - 1}: "
                           f"{[n for n, _ in out]}")
    return out
