"""Names from the model file never change what the generated C means
(issue 35): every node and tensor of the tiny network renamed to hold what
could end a comment, open a string, start a preprocessor line, splice
lines or form a trigraph (`*/`, quotes, newlines, `#`, backslashes,
`??/`, non-ASCII), C keywords, and names that collide once made C
identifiers. The generated C compiles and the build is bit-exact on host,
stm32h7 (QEMU) and gap8 (QEMU), with the golden output of the plainly
named network."""

import glob
import os

import numpy as np
import onnx
import pytest

from helpers import MODEL_CACHE, scons

HOSTILE = 'a*/ "q\' \n#define X 1\\\n??/ /* é—名 '
KEYWORDS = ["int", "for", "main", "return", "static", "void", "", "_", "9"]


def _hostile(model):
    """Every tensor and node renamed."""
    g = model.graph
    names = {}
    for n in g.node:
        for t in list(n.input) + list(n.output):
            if t and t not in names:
                names[t] = f"{HOSTILE}{KEYWORDS[len(names) % len(KEYWORDS)]} #{len(names)}"
    for t in list(g.input) + list(g.output) + list(g.value_info):
        names.setdefault(t.name, f"{HOSTILE}io{len(names)}")
    for t in g.initializer:
        names.setdefault(t.name, f"{HOSTILE}w{len(names)}")
    for i, n in enumerate(g.node):
        n.input[:] = [names.get(t, t) for t in n.input]
        n.output[:] = [names.get(t, t) for t in n.output]
        # unique (ONNX Runtime wants it), but the same once made C identifiers,
        # and one the name the second is made unique as
        fixed = [HOSTILE, HOSTILE + "*", HOSTILE + "\\", "a_q_define_X_1_2", "a-2", "a 2"]
        n.name = fixed[i] if i < len(fixed) else HOSTILE + KEYWORDS[i % len(KEYWORDS)] + "*" * (i + 1)
    for t in list(g.input) + list(g.output) + list(g.value_info) + list(g.initializer):
        t.name = names[t.name]
    g.name = HOSTILE + "graph"
    return model


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(plain model YAML, hostile model YAML, out): the tiny network as an
    ONNX file, once with its names and once renamed."""
    d = tmp_path_factory.mktemp("names")
    out = d / "out"
    scons("target=host", "model=tiny", out=out, check=True)      # makes the tiny ONNX in the model cache
    src = sorted(glob.glob(os.path.join(MODEL_CACHE, "tiny-*.onnx")), key=os.path.getmtime)[-1]
    model = onnx.load(src)
    onnx.save(model, d / "plain.onnx")
    onnx.checker.check_model(_hostile(model), full_check=True)
    onnx.save(model, d / "hostile.onnx")
    for name in ("plain", "hostile"):
        (d / f"{name}.yaml").write_text(f"description: tiny, {name} names\nonnx: {name}.onnx\ninput: {{seed: 0}}\n")
    scons("target=host", f"model={d / 'plain.yaml'}", out=out, check=True)
    return d / "plain.yaml", d / "hostile.yaml", out


def _output(netdir):
    import json

    graph = json.loads((netdir / "graph.json").read_text())
    golden = np.load(netdir / "golden.npz")
    return [golden[name] for name in graph["outputs"]]


@pytest.mark.parametrize("target", ["host", "stm32h7", "gap8"])
def test_hostile_names_build_bit_exact(models, target):
    plain, hostile, out = models
    res = scons(f"target={target}", f"model={hostile}", out=out, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "Traceback" not in res.stdout + res.stderr
    netdir = out / target / "hostile"
    assert (netdir / ".passed").exists()
    # the same network: the golden output equals the plainly named one's
    ref = _output(out / "host" / "plain")
    got = _output(netdir)
    assert len(ref) == len(got) and all(np.array_equal(a, b) for a, b in zip(ref, got))
    # no name reaches the C unescaped: not a comment's end, not a newline or
    # a non-ASCII character, not a preprocessor line of its own
    for path in sorted(glob.glob(str(netdir / "src" / "*.[ch]"))):
        text = open(path, "rb").read()
        assert text.isascii(), path
        assert b"\n#define X" not in text and b'*/ "q' not in text and b"??/" not in text, path
    # colliding node names became distinct layers
    import json

    layers = [l["name"] for l in json.loads((netdir / "graph.json").read_text())["layers"]]
    assert len(layers) == len(set(layers)) == len(json.loads((out / "host" / "plain" / "graph.json")
                                                              .read_text())["layers"])
