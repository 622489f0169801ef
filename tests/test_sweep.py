"""tessera sweep (issue 36): expanding a sweep file, the derived target
YAML, points built as ordinary builds in processes and on a Ray cluster,
the failing point's one-line error, resume, the table, the Pareto front,
the smallest memory and the page. Small sweeps (tiny on host and gap8);
the 45-point sweep of docs/sweeps.md is a benchmark, not a test."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from tessera import config, sweep
from tessera.errors import ConfigError
from tessera.sweep import point as sweep_point, spec as sweep_spec

ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "site_scons"))


def write(tmp_path, text, name="s.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def tessera(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tessera", *args], cwd=cwd, env=ENV, capture_output=True,
                          text=True)


# --- the sweep file ---------------------------------------------------------

def test_expand_points_and_derived_targets(tmp_path):
    f = write(tmp_path, "models: [tiny, dscnn_kws]\ntargets: [gap8]\naxes:\n"
              "  memory.L1.size: [32000, 48000]\n  dma.cluster_dma.bandwidth: [4, 8]\n  fusion: [none, min_latency]\n")
    spec = sweep.load(f)
    points = sweep.expand(spec)
    assert len(points) == 2 * 2 * 2 * 2
    assert len({p["folder"] for p in points}) == len(points)
    p = next(p for p in points if p["model"] == "dscnn_kws" and dict(p["overrides"]) ==
             {"memory.L1.size": 48000, "dma.cluster_dma.bandwidth": 4} and p["variables"] == {"fusion": "none"})
    name, text = sweep_spec.derived_target(p)
    assert (name, text) == sweep_spec.derived_target(p)          # byte-identical every time
    assert name == "gap8_L1_48000_dma_cluster_dma_bandwidth_4.yaml"
    out = tmp_path / name
    out.write_text(text)
    tcfg = config.load_target(str(out), name[:-5])              # a valid target
    base = config.load_target(os.path.join(ROOT, "targets", "gap8.yaml"), "gap8")
    assert tcfg["memory"]["L1"]["size"] == 48000 and base["memory"]["L1"]["size"] == 64000
    assert [d["bandwidth"] for d in tcfg["dma"]] == [4, base["dma"][1]["bandwidth"]]
    assert tcfg["memory"]["L2"] == base["memory"]["L2"]
    # a sweep over variables only builds the bundled target itself
    only_vars = sweep.expand(sweep.load(write(tmp_path, "models: [tiny]\ntargets: [host]\naxes: {overlap: [0, 1]}\n",
                                              "v.yaml")))
    assert [sweep_spec.derived_target(p) for p in only_vars] == [None, None]


@pytest.mark.parametrize("text, words", [
    ("models: [tiny]\ntargets: [gap8]\naxes: {memory.L9.size: [1]}\n", ["memory.L9.size", "not a numeric field"]),
    ("models: [tiny]\ntargets: [gap8]\naxes: {description: [1]}\n", ["description", "not a numeric field"]),
    ("models: [tiny]\ntargets: [gap8]\naxes: {memory.L1.size: [big]}\n", ["memory.L1.size", "takes numbers"]),
    ("models: [nosuch]\ntargets: [gap8]\n", ["nosuch", "unknown model"]),
    ("models: [tiny]\ntargets: [gap8]\nvariables: {out: x}\n", ["variables: out", "not a build variable"]),
    ("models: [tiny]\ntargets: [gap8]\nlatncy: 5\n", ["latncy", "unknown key"]),
])
def test_bad_sweep_file_is_one_line(tmp_path, text, words):
    f = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        sweep.load(f)
    assert all(w in str(err.value) for w in words) and f in str(err.value)
    res = tessera("sweep", f, "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and words[0] in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "o").exists()


# --- results: hand-made rows ------------------------------------------------

def _row(model, l1, lat, ram, status="ok"):
    return {"model": model, "memory.L1.size": l1, "status": status, "latency": lat, "estimate": None,
            "ram_total": ram}


def test_pareto_and_smallest_on_known_rows():
    spec = {"axes": [{"key": "memory.L1.size", "kind": "target", "values": [1, 2, 3, 4]}], "latency": 100}
    rows = [_row("a", 1, 150, 10), _row("a", 2, 100, 20), _row("a", 3, 100, 30), _row("a", 4, 80, 25),
            _row("a", 5, None, None, "failed"),
            _row("b", 1, 90, 12), _row("b", 2, 95, 22), _row("b", 3, 60, 32), _row("b", 4, 120, 26)]
    front = sweep.pareto(rows)
    # a: (10,150) (20,100) (25,80); (30,100) is beaten by (25,80); b: (12,90) (32,60)
    assert [(r["ram_total"], r["latency"]) for r in front["a"]] == [(10, 150), (20, 100), (25, 80)]
    assert [(r["ram_total"], r["latency"]) for r in front["b"]] == [(12, 90), (32, 60)]
    small = sweep.smallest(spec, rows)
    assert small["models"]["a"]["config"] == {"memory.L1.size": 2}
    assert small["models"]["b"]["config"] == {"memory.L1.size": 1}
    assert small["all"]["config"] == {"memory.L1.size": 2}          # a needs 2, b reaches it there (95)
    assert sweep.smallest(spec, rows, 70)["models"]["a"] is None
    assert sweep.smallest(spec, rows, 70)["all"] is None
    # the page draws every point with a latency, the front as a line
    from tessera.sweep import page
    spec.update(name="t", targets=[{"name": "x"}])
    rows = [dict(r, count="qemu-instructions", error=None) for r in rows]
    text = page.html(spec, rows, front, small)
    charts = text.split("<h2>Pareto front")[0]
    assert charts.count("<svg") == 2 and charts.count("<circle") == 8 and charts.count("<polyline") == 2
    assert charts.count('r="5"') == 5                    # the five points on the fronts, drawn larger


# --- real builds: tiny on host ----------------------------------------------

TINY = """name: tiny_l1
models: [tiny]
targets: [host]
axes:
  memory.L1.size: [2000, 4000, 64000]
"""


def _sweep(tmp_path, out, *extra):
    return tessera("sweep", str(tmp_path / "s.yaml"), "--out", str(out), "--cache", str(tmp_path / "cache"),
                   "-j2", *extra, cwd=str(tmp_path))


def test_local_sweep_failing_point_resume_and_page(tmp_path):
    write(tmp_path, TINY)
    out = tmp_path / "local"
    res = _sweep(tmp_path, out)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3 built now, 0 done before, 1 failed" in res.stdout
    rows = json.loads((out / "table.json").read_text())["rows"]
    assert [r["memory.L1.size"] for r in rows] == [2000, 4000, 64000]
    bad, small, big = rows
    # the point that cannot fit: its fit error, one line, naming the layer and L1
    assert bad["status"] == "failed" and bad["error"].startswith("tessera: error: layer ")
    assert "L1" in bad["error"] and "\n" not in bad["error"]
    assert small["status"] == big["status"] == "ok" and small["verdict"] == big["verdict"] == "pass"
    # each point is an ordinary build: its report.json is what the table says
    for r, l1 in ((small, 4000), (big, 64000)):
        rep = json.loads((out / "points" / "tiny" / f"host_L1_{l1}" / "generated" / f"host_L1_{l1}" / "tiny" /
                          "report.json").read_text())
        assert r["ram_L1"] == rep["memory"]["L1"]["ram"] and r["ram_L2"] == rep["memory"]["L2"]["ram"]
        assert rep["memory"]["L1"]["size"] == l1
    assert small["ram_L1"] <= 4000 < big["ram_L1"]
    csv_lines = (out / "table.csv").read_text().splitlines()
    assert csv_lines[0].startswith("model,target,memory.L1.size,status") and len(csv_lines) == 4
    page = (out / "pareto.html").read_text()
    assert "tiny: no point with both a latency and a RAM total" in page      # host counts nothing
    assert "<script" not in page and "src=" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert "Failed points" in page and "smallest tile" in page
    # a second run builds nothing
    table = (out / "table.json").read_bytes()
    again = _sweep(tmp_path, out)
    assert "0 built now, 3 done before" in again.stdout, again.stdout
    assert (out / "table.json").read_bytes() == table
    # an interrupted sweep (a point without its result file) finishes only that one
    os.unlink(out / "points" / "tiny" / "host_L1_64000" / "result.json")
    resumed = _sweep(tmp_path, out)
    assert "1 built now, 2 done before" in resumed.stdout, resumed.stdout
    assert (out / "table.json").read_bytes() == table
    # a result written for other inputs (the base target or the point changed) is not taken as done
    spec = sweep.load(str(tmp_path / "s.yaml"))
    p = sweep.expand(spec)[1]
    assert sweep_point.read_result(str(out), p)["status"] == "ok"
    edited = dict(p, overrides=[("memory.L1.size", 4096)])
    assert sweep_point.read_result(str(out), edited) is None


def test_killed_sweep_resumes(tmp_path):
    """SIGINT half-way: the points done keep their result files (written
    atomically), the rerun builds only the others."""
    write(tmp_path, "models: [tiny]\ntargets: [host]\naxes:\n  memory.L1.size: [4000, 8000, 16000]\n")
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "tessera", "sweep", str(tmp_path / "s.yaml"), "--out", str(out),
                             "--cache", str(tmp_path / "cache"), "-j1"], env=ENV, cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    for line in proc.stdout:
        if line.startswith("[1/3]"):
            break
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=120)
    done = sorted(p.parent.name for p in out.glob("points/*/*/result.json"))
    assert 1 <= len(done) < 3, done
    res = _sweep(tmp_path, out)
    assert f"{3 - len(done)} built now, {len(done)} done before, 0 failed" in res.stdout, res.stdout


def test_estimate_without_running(tmp_path):
    """--estimate: the cost model's count stands in for the run (gap8 has
    coefficients): no firmware, no report, an estimate per point."""
    write(tmp_path, "models: [tiny]\ntargets: [gap8]\naxes:\n  memory.L1.size: [16000, 64000]\n")
    out = tmp_path / "est"
    res = _sweep(tmp_path, out, "--estimate")
    assert res.returncode == 0 and "0 failed" in res.stdout, res.stdout + res.stderr
    rows = json.loads((out / "table.json").read_text())["rows"]
    assert all(r["status"] == "ok" and r["latency"] is None and r["estimate"] > 0 for r in rows)
    assert rows[0]["ram_L1"] <= 16000 and rows[0]["ram_total"] > 0
    assert not list(out.glob("points/*/*/generated/*/*/firmware*"))
    assert not list(out.glob("points/*/*/generated/*/*/report.json"))


# --- Ray: a local cluster on loopback ----------------------------------------

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_cluster(tmp_path):
    pytest.importorskip("ray")
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    if not os.path.exists(ray_bin):
        pytest.skip("the ray command is not installed beside this Python")
    port = _free_port()
    # its own session (killed as a group afterwards), its own temp folder
    temp = f"/tmp/ray_sweep_{os.getpid()}"
    proc = subprocess.Popen([ray_bin, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
                             "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
                             f"--temp-dir={temp}"], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("the Ray head did not start")
                time.sleep(1)
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


def test_ray_sweep_gives_the_local_table(tmp_path, ray_cluster):
    """Opt-in: runs where Ray is installed (pip install ray; not in
    requirements.txt: a 70 MB wheel and a minute of cluster start and stop)."""
    write(tmp_path, TINY.replace("[2000, 4000, 64000]", "[2000, 4000]"))
    local = _sweep(tmp_path, tmp_path / "local")
    assert local.returncode == 0, local.stdout + local.stderr
    res = _sweep(tmp_path, tmp_path / "ray", "--ray", ray_cluster)
    assert res.returncode == 0 and f"on Ray cluster {ray_cluster}" in res.stdout, res.stdout + res.stderr
    assert "2 built now" in res.stdout
    # the same points in another folder: every compilation comes from the shared cache
    assert "(0 files compiled, " in res.stdout and "(0 files compiled, 0 steps" not in res.stdout, res.stdout
    assert "(0 files compiled" not in local.stdout, local.stdout
    for name in ("table.json", "table.csv"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    assert json.loads((tmp_path / "ray" / "table.json").read_text())["rows"][1]["verdict"] == "pass"
