"""Bad input from the command line and in files: one `tessera: error:` line
naming the file or variable and what to change, a non-zero exit, no
traceback, and nothing written that a later build would trust."""

import os

import pytest

from helpers import ROOT, one_error, scons


def _model_yaml(tmp_path, text, encoding="utf-8"):
    path = tmp_path / "m.yaml"
    path.write_bytes(text.encode(encoding))
    return path


@pytest.mark.parametrize("encoding, expect", [("utf-16", "UTF-16"), ("latin-1", "not UTF-8")])
def test_a_model_yaml_that_is_not_utf8(tmp_path, encoding, expect):
    yml = _model_yaml(tmp_path, "description: caf\u00e9\nonnx: net.onnx\n", encoding)
    line = one_error(scons("target=host", f"model={yml}", out=tmp_path / "out"))
    assert str(yml) in line and expect in line and "UTF-8" in line


def test_a_target_yaml_that_is_not_utf8(tmp_path):
    with open(os.path.join(ROOT, "targets", "host.yaml"), encoding="utf-8") as f:
        text = f.read()
    target = tmp_path / "t.yaml"
    target.write_bytes(text.encode("utf-16"))
    line = one_error(scons(f"target={target}", "model=tiny", out=tmp_path / "out"))
    assert str(target) in line and "UTF-16" in line


def test_a_model_yaml_that_is_huge(tmp_path):
    yml = tmp_path / "m.yaml"
    yml.write_bytes(b"#" * (2 << 20))
    line = one_error(scons("target=host", f"model={yml}", out=tmp_path / "out"))
    assert str(yml) in line and "larger than" in line


@pytest.mark.parametrize("kind", ["file", "under a file", "empty", "dollar"])
def test_out_that_cannot_be_an_output_directory(tmp_path, kind):
    afile = tmp_path / "afile"
    afile.write_text("x")
    out = {"file": str(afile), "under a file": str(afile / "sub"), "empty": "",
           "dollar": str(tmp_path / "a$b")}[kind]
    cmd = ["target=host", "model=tiny"]
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-m", "SCons", "-C", ROOT, f"out={out}", *cmd],
                         capture_output=True, text=True)
    line = one_error(res)
    assert line.startswith(f"tessera: error: out={out}:"), line
    assert afile.read_text() == "x"
    assert sorted(os.listdir(tmp_path)) == ["afile"]   # nothing made beside it
