"""What tessera's build prints (tessera_scons/console.py): one short line
per compile step unless verbose=1, the summary and the verdict last, also on
a no-op rebuild; on a terminal (a pseudo-terminal from util-linux's
`script`), a progress display with the tiling solves counted against the
network's layers instead of a line per step."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from helpers import MODEL_CACHE, ROOT, scons


def last_line(text):
    return text.rstrip().splitlines()[-1]


def test_quiet_by_default_verbose_on_request_verdict_always(tmp_path):
    out = tmp_path / "out"
    first = scons("target=host", "model=tiny", out=out, check=True).stdout
    compiled = re.findall(r"^tessera: compile (\S+)$", first, re.M)
    assert any(p.endswith("/obj/conv0.o") for p in compiled), first[-3000:]
    assert not re.search(r"^\S*gcc ", first, re.M)
    assert "tiny on host: PASS" in first
    assert last_line(first).startswith("tessera: PASS tiny on host: 9 layers bit-exact with the golden model")
    # the summary comes after every step's line
    assert first.index("tiny on host: PASS") > first.index("tessera: report ")

    noop = scons("target=host", "model=tiny", out=out, check=True).stdout
    assert not re.search(r"^tessera: (tile|generate|compile|run|check|report) ", noop, re.M)
    assert "tiny on host: PASS" in noop and last_line(noop) == last_line(first)

    os.remove(out / "host" / "tiny" / "obj" / "conv0.o")
    verbose = scons("target=host", "model=tiny", "verbose=1", out=out, check=True).stdout
    assert re.search(r"^gcc -o \S+/obj/conv0\.o -c .*/src/conv0\.c$", verbose, re.M), verbose[-3000:]
    assert last_line(verbose) == last_line(first)


def test_a_failing_step_shows_its_error_and_no_stale_summary(tmp_path):
    """A build that passed, then the same network on a target whose L1 no
    tile fits: the tiling step's error, no summary of the old report."""
    out = tmp_path / "out"
    scons("target=host", "model=tiny", out=out, check=True)
    (tmp_path / "t").mkdir()
    small = tmp_path / "t" / "host.yaml"
    text = open(os.path.join(ROOT, "targets", "host.yaml")).read()
    small.write_text(re.sub(r"(\n  L1:\n    size: )\d+", r"\g<1>600", text))
    res = scons(f"target={small}", "model=tiny", out=out)
    assert res.returncode != 0
    assert re.search(r"^tessera: error: .*L1", res.stderr, re.M), res.stderr[-2000:]
    assert "PASS" not in res.stdout and "FAIL" not in res.stdout
    assert not (out / "host" / "tiny" / "report.json").exists()


@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux's script for a pseudo-terminal")
def test_a_terminal_gets_a_progress_display(tmp_path):
    out = tmp_path / "out"
    cmd = f"{sys.executable} -m SCons -C {ROOT} out={out} target=host model=tiny"
    env = dict(os.environ, TESSERA_MODEL_CACHE=MODEL_CACHE, COLUMNS="160", LINES="50", TERM="xterm")
    res = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True, env=env,
                         stdin=subprocess.DEVNULL, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:]
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", res.stdout).replace("\r", "\n")
    assert not re.search(r"^tessera: (tile|compile) ", text, re.M)      # no line per step
    assert re.search(r"tile\s+9/9\b", text), text[-3000:]                 # solves done of the layers
    assert re.search(r"compile\s+\d+\b", text) and re.search(r"\brun\s+1\b", text)
    assert "tessera: PASS tiny on host" in text
