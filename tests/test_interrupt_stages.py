"""Ctrl-C at each stage of a build (preparation, tiling, code generation,
compiling, running), then the same build again: the tree equals a clean
build's byte for byte, and the interrupted build claims no success.
Preparation is special: it runs while SCons reads SConstruct."""

import os
import shutil
import signal
import subprocess
import sys

import pytest

from helpers import MODEL_CACHE, ROOT, build_tree as _tree, scons

STAGES = {"preparation": "tessera: running the golden model", "tiling": "tessera: tile ",
          "codegen": "tessera: generate ", "compiling": "tessera: compile ", "running": "tessera: run "}


@pytest.fixture(scope="module")
def clean_tree(tmp_path_factory):
    out = tmp_path_factory.mktemp("stages") / "out"
    scons("target=host", "model=tiny", out=out, check=True)
    tree = _tree(out)
    shutil.rmtree(out)
    return out, tree


@pytest.mark.parametrize("stage", list(STAGES))
def test_interrupt_then_rebuild_equals_a_clean_build(clean_tree, stage):
    out, clean = clean_tree      # the same path, so paths inside files agree
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, f"out={out}", "target=host", "model=tiny"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, TESSERA_MODEL_CACHE=MODEL_CACHE, PYTHONUNBUFFERED="1"))
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(STAGES[stage]):
            proc.send_signal(signal.SIGINT)    # as a terminal's Ctrl-C would
            break
    text = "".join(seen) + proc.communicate()[0]
    assert any(l.startswith(STAGES[stage]) for l in seen), text
    assert "Traceback" not in text, text
    passed = out / "host" / "tiny" / ".passed"
    # the signal comes before the check and the report, so the build stops short
    assert proc.returncode != 0, text
    assert not passed.exists(), "an interrupted build claims success"
    scons("target=host", "model=tiny", out=out, check=True)
    again = _tree(out)
    assert sorted(again) == sorted(clean)
    assert [p for p in clean if again[p] != clean[p]] == []
