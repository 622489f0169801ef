"""DORY's reference files: input.txt and out_layerN.txt.

Each file is a header line `# name (shape [H, W, C]),\\` then one value per
line followed by `,\\`, in HWC order (source values: uint8 activations as
0..255, the last layer's int32 accumulators as they are). Some DORY
examples write CHW instead, with a `[C, H, W]` header: the header tells
which (a shape that reads both ways, H = W = C, is DORY's own HWC). Some
files repeat their block (header and values) twice; the first block is the
data. A few examples (dscnn_test) leave out the header's `#` and copy one
header into every file: their shapes say nothing, their values are CHW.
"""

import os
import re

import math

import numpy as np

from ...errors import TesseraError

_HEADER = re.compile(r"#?\s*(?P<name>.*?)\s*\(shape\s*\[(?P<shape>[^\]]*)\]\)")
# a header without its `#` (dscnn_test)
_BARE_HEADER = re.compile(r"[A-Za-z_][^(]*\(shape\s*\[")


def read_txt(path):
    """(name, shape list, int64 values) of the first block of a DORY text
    file; shape None for a header without `#`, whose values are CHW."""
    try:
        with open(path) as f:
            lines = [ln.strip() for ln in f]
    except OSError as err:
        raise TesseraError(path, f"cannot read ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise TesseraError(path, f"not text: byte {err.start} is not UTF-8",
                           "a DORY reference is a text file of numbers") from None
    name, shape, values, bare = None, None, [], False
    for i, line in enumerate(lines):
        if not line:
            continue
        if line.startswith("#") or _BARE_HEADER.match(line):
            if name is not None:
                break                      # a repeated block
            bare = not line.startswith("#")
            m = _HEADER.match(line)
            if not m:
                raise TesseraError(f"{path}:{i + 1}", f"header {line[:60]!r} is not `# name (shape [...]),\\`")
            name = m.group("name")
            try:
                shape = [int(d) for d in m.group("shape").split(",") if d.strip()]
            except ValueError:
                raise TesseraError(f"{path}:{i + 1}", f"header shape [{m.group('shape')}] is not a list of "
                                   "integers", "write it as `# name (shape [H, W, C]),\\`") from None
            if any(d <= 0 for d in shape):
                raise TesseraError(f"{path}:{i + 1}", f"header shape {shape} has a dimension below 1")
            continue
        text = line.rstrip("\\").rstrip().rstrip(",")
        try:
            v = float(text)
        except ValueError:
            raise TesseraError(f"{path}:{i + 1}", f"not a number: {line!r}") from None
        # NaN and inf are no integers; a value beyond 32 bits is no tensor element
        if not math.isfinite(v) or v != int(v) or abs(v) >= 1 << 32:
            raise TesseraError(f"{path}:{i + 1}", f"not an integer of at most 32 bits: {line[:40]!r}")
        values.append(int(v))
    if name is None:
        raise TesseraError(path, "no `# name (shape [...])` header")
    values = np.asarray(values, dtype=np.int64)
    if bare:
        # dscnn_test's files all carry layer 0's header, [1, H, W, C], over
        # values in PyTorch's order: the shape says nothing (None: CHW)
        return name, None, values
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


def layout(shape, hwc):
    """"hwc" or "chw": how a file with header `shape` holds a tensor tessera
    has as [H, W, C]; None when it is neither."""
    if shape is None:
        return "chw"
    shape = [int(d) for d in shape]
    h, w, c = hwc
    if shape in ([h, w, c], [h * w * c]) or shape == [w, c] and h == 1:
        return "hwc"
    if shape == [c, h, w] or shape == [c, w] and h == 1:
        return "chw"
    return None


def as_hwc(values, shape, hwc):
    """The file's values as an [H, W, C] array (None: the header's shape is
    neither layout)."""
    order = layout(shape, hwc)
    if order is None or values.size != int(np.prod(hwc)):
        return None
    h, w, c = hwc
    if order == "chw":
        return values.reshape(c, h, w).transpose(1, 2, 0)
    return values.reshape(h, w, c)
