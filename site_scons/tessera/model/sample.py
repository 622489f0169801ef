"""A user's sample as the golden input (`input: {file: ...}` in a model
YAML): the golden model, the firmware and the ONNX Runtime / TFLite check
all run on it.

- `.npy`: one array for a one-input model; `.npz`: an array per input name
  (or one array for a one-input model). Float arrays are real values,
  quantized with the input's scale and zero point; integer arrays are the
  quantized values themselves (the input's own type, int8 or uint8). The
  shape is the input's as the model gives it (NCHW or NHWC, batch 1, or
  without the batch) or tessera's [H, W, C].
- an image (`.png`, `.jpg`, `.bmp`, ...) for a model whose input is an
  image (1 or 3 channels): converted to grey or RGB, resized to the
  input's H x W (bilinear), each pixel p read as the real value
  low + p * (high - low) / 255 (`range: [low, high]`, default [0, 1]),
  then quantized.
- anything else (`.bin`, `.raw`): the input's quantized bytes as the
  application would pass them (its type; channel first for an ONNX
  model, channel last for a .tflite one).
"""

import os

import numpy as np

from ..errors import ConfigError

IMAGES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".pgm", ".tif", ".tiff", ".webp")
_RANGES = {"int8": (-128, 127), "uint8": (0, 255)}


def load(spec, graph, where):
    """{input name: stored array} (tessera's HWC int8, uint8 stored less
    128) from `spec` (the model YAML's `input:` with `file:` absolute);
    `where` the model YAML, for one-line errors."""
    path = spec["file"]
    ext = os.path.splitext(path)[1].lower()
    names = list(graph.inputs)
    if ext == ".npz":
        arrays = _np_load(path, where)
        if len(arrays) == 1 and len(names) == 1:
            arrays = {names[0]: next(iter(arrays.values()))}
        missing = [n for n in names if n not in arrays]
        if missing:
            raise ConfigError(where, f"input.file: {path} has no array named {missing[0]!r} "
                              f"(it has {', '.join(sorted(arrays)) or 'none'})",
                              f"name the arrays after the inputs: {', '.join(names)}")
        return {n: _from_array(arrays[n], graph.tensor(n), channel_first(graph.tensor(n), graph), path, where)
                for n in names}
    if len(names) != 1:
        raise ConfigError(where, f"input.file: the model has {len(names)} inputs ({', '.join(names)})",
                          "give a .npz file with one array per input name")
    t = graph.tensor(names[0])
    if ext == ".npy":
        return {t.name: _from_array(_np_load(path, where), t, channel_first(t, graph), path, where)}
    if ext in IMAGES:
        return {t.name: _from_image(path, t, spec.get("range") or [0.0, 1.0], where)}
    return {t.name: _from_raw(path, t, channel_first(t, graph), where)}


def _np_load(path, where):
    """A .npy array, or a .npz file's {name: array}; one line when NumPy
    cannot read it (pickled objects are never loaded)."""
    import zipfile

    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                return {k: data[k] for k in data.files}
        return data
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise ConfigError(where, f"input.file: cannot read {path} as a NumPy array file "
                          f"({err.__class__.__name__})", "save it with numpy.save or numpy.savez "
                          "(numbers, not Python objects)") from None


def _quantize(real, t, path, where):
    if t.scale is None:
        raise ConfigError(where, f"input.file: {path} holds real values but the input {t.name} has no scale",
                          "give its quantized values (an int8 or uint8 array, or raw bytes)")
    zp = t.zero_point or 0
    lo, hi = _RANGES.get(t.source_dtype, (-128, 127))
    return np.clip(np.rint(np.asarray(real, dtype=np.float64) / t.scale) + zp, lo, hi).astype(np.int64)


def _stored(q, t):
    return (np.asarray(q, dtype=np.int64) - t.shift).astype(np.int8)


def channel_first(t, graph):
    """Whether the model gives the tensor channel first (ONNX) or last (TFLite)."""
    return t.source_layout != "hwc" and graph.dialect != "tflite"


def _to_hwc(a, t, chw_first, path, where):
    """The array in tessera's [H, W, C], from the model's own shape (batch
    1 or none, channel first or last) or HWC itself."""
    H, W, C = t.shape
    shape = [d for d in a.shape]
    while len(shape) > 3 and shape[0] == 1:
        shape = shape[1:]
    a = a.reshape(shape)
    options = [("chw", [C, H, W]), ("hwc", [H, W, C])]
    if not chw_first:
        options.reverse()
    for layout, want in options:
        if list(a.shape) == want:
            return a.transpose(1, 2, 0) if layout == "chw" else a
    squeezed = [d for d in a.shape if d != 1]
    if squeezed == [d for d in (H, W, C) if d != 1]:
        return a.reshape(H, W, C)
    raise ConfigError(where, f"input.file: {path} holds an array of shape {list(a.shape)}, the input "
                      f"{t.name} is {[C, H, W] if chw_first else [H, W, C]}",
                      "give the input's shape (batch 1 or none)")


def _from_array(a, t, chw_first, path, where):
    a = _to_hwc(np.asarray(a), t, chw_first, path, where)
    if a.dtype.kind == "f":
        return _stored(_quantize(a, t, path, where), t)
    if a.dtype.kind not in "iu":
        raise ConfigError(where, f"input.file: {path} holds {a.dtype} values", "give real (float) values, or "
                          "the input's quantized values")
    lo, hi = _RANGES.get(t.source_dtype, (-128, 127))
    if a.size and (a.min() < lo or a.max() > hi):
        raise ConfigError(where, f"input.file: {path}: values {int(a.min())}..{int(a.max())} do not fit the "
                          f"input's {t.source_dtype}", "give real values as floats, or the quantized values "
                          f"({t.source_dtype})")
    return _stored(a, t)


def _from_image(path, t, rng, where):
    from PIL import Image, UnidentifiedImageError

    H, W, C = t.shape
    if C not in (1, 3):
        raise ConfigError(where, f"input.file: {path} is an image, the input {t.name} has {C} channels",
                          "give an array (.npy) for an input that is not a grey or RGB image")
    if not (isinstance(rng, list) and len(rng) == 2 and all(isinstance(v, (int, float)) for v in rng)):
        raise ConfigError(where, f"input.range: expected [low, high], got {rng!r}",
                          "the real values pixels 0 and 255 stand for, e.g. [0, 1] or [-1, 1]")
    try:
        with Image.open(path) as img:
            img = img.convert("RGB" if C == 3 else "L").resize((W, H), Image.BILINEAR)
            pixels = np.asarray(img, dtype=np.float64).reshape(H, W, C)
    except (OSError, UnidentifiedImageError) as err:
        raise ConfigError(where, f"input.file: {path}: not an image pillow reads ({err.__class__.__name__})",
                          "give a PNG, JPEG or BMP file, or an array (.npy)") from None
    low, high = float(rng[0]), float(rng[1])
    return _stored(_quantize(low + pixels * (high - low) / 255.0, t, path, where), t)


def _from_raw(path, t, chw_first, where):
    H, W, C = t.shape
    dtype = np.uint8 if t.source_dtype == "uint8" else np.int8
    data = np.fromfile(path, dtype=dtype)
    if data.size != H * W * C:
        raise ConfigError(where, f"input.file: {path} has {data.size} bytes, the input {t.name} takes "
                          f"{H * W * C} ({t.source_dtype}, {H}x{W}x{C})",
                          "give the quantized input as raw bytes, or a .npy array")
    a = data.reshape(C, H, W).transpose(1, 2, 0) if chw_first else data.reshape(H, W, C)
    return _stored(a.astype(np.int64), t)
