"""Names made from a model's names: C identifiers (c_name), file stems
(tiling_stem). In a module of its own: declaring a build's steps needs
the network's C prefix, not the frontend (onnx, numpy)."""

import hashlib
import re


def c_name(text):
    """A C-identifier-safe version of an ONNX name."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_")
    name = re.sub(r"_+", "_", name)
    if not name or name[0].isdigit():
        name = "l" + name
    return name


def tiling_stem(group):
    """The file name (without .fused.json) of a fused group's tiling: the
    group's name, or, where two long ONNX node names would exceed a file
    system's 255 bytes, a prefix of it and a digest of the whole."""
    if len(group.encode()) <= 150:
        return group
    return group.encode()[:100].decode(errors="ignore") + "-" + hashlib.sha1(group.encode()).hexdigest()[:16]


def c_comment(text):
    """Text from a model file (a node, tensor or graph name) as it may sit
    inside a C block comment without changing what the C means: printable
    ASCII only (anything else, a newline or a backslash, as <U+XXXX>), no
    `*/` or `/*` (a space between), no `??` (a trigraph under -std=c99)."""
    out = []
    for ch in str(text):
        if ch == "\\" or not (" " <= ch <= "~"):
            out.append(f"<U+{ord(ch):04X}>")
        elif (ch == "/" and out and out[-1].endswith("*")) or (ch == "*" and out and out[-1].endswith("/")):
            out.append(" " + ch)
        elif ch == "?" and out and out[-1].endswith("?"):
            out.append(" ?")
        else:
            out.append(ch)
    return "".join(out)
