"""tools/compare_builds.py's comparison, on small trees written here as a
build stores them (no build runs): identical trees, one byte changed, a
wall-clock field changed only, a file missing on one side, builds that fail
on one or both sides; and the issue 25 matrix it builds."""

import copy
import importlib.util
import json
import os
import threading

import pytest

from helpers import ROOT

_spec = importlib.util.spec_from_file_location("compare_builds", os.path.join(ROOT, "tools", "compare_builds.py"))
cb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cb)

CONV = """#include "network.h"

void tsr_conv0(const int8_t *in, int8_t *out)
{
    tsr_dma_copy(l1 + 0, in, 1280);
    tsr_conv2d(l1 + 0, l1 + 1280, 8, 8, 8);
}
"""


def report(method="qemu-instructions", counts=(1000, 2500)):
    key = {"qemu-instructions": "instructions", "host-ns": "host_ns", "gvsoc-cycles": "cycles"}[method]
    layers = [{"name": f"l{i}", "op": "conv2d", "macs": 13824, key: n,
               "cost": {"estimate": 2000, "measured": n, "error": round((2000 - n) / n, 4)}}
              for i, n in enumerate(counts)]
    return {"target": "t", "model": "m", "verdict": "pass", "counts": {"method": method, "note": "x"},
            "layers": layers, "totals": {"macs": 27648, key: sum(counts),
                                         "cost": {"estimate": 4000, "measured": sum(counts)}}}


def write_tree(folder, returncode=0, error=None, rep=None, files=None):
    """A stored build as run_build leaves it: the compared files and .build.json."""
    files = {"src/conv0.c": CONV, "src/network.h": "#pragma once\n", "tiling/conv0.json": '{"tile": [8, 8, 8]}\n',
             "memplan.json": '{"L2": {"peak": 3072}}\n', "plan/conv0.json": '{"in": 0, "out": 1024}\n',
             "schedule.json": '{"steps": ["conv0"]}\n'} if files is None else files
    if rep is not None:
        files = dict(files, **{"report.json": json.dumps(rep, indent=1, sort_keys=True) + "\n"})
    folder.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (folder / cb.META).write_text(json.dumps({"returncode": returncode, "error": error, "files": len(files),
                                              "seconds": 1.0}))
    return str(folder)


def test_identical_trees(tmp_path):
    a = write_tree(tmp_path / "a", rep=report())
    b = write_tree(tmp_path / "b", rep=report())
    res = cb.compare_build(a, b)
    assert res["status"] == "identical"
    assert res["line"] == "identical (7 files)"


def test_one_byte_differs(tmp_path):
    a = write_tree(tmp_path / "a", rep=report())
    b = write_tree(tmp_path / "b", rep=report(), files={})
    write_tree(tmp_path / "b", rep=report())
    conv = tmp_path / "b" / "src" / "conv0.c"
    conv.write_text(CONV.replace("1280);", "1288);", 1))    # one byte, on line 5
    res = cb.compare_build(a, b)
    assert res["status"] == "differs"
    assert res["line"] == "differs: 1 file, first src/conv0.c line 5"
    assert res["diffs"][0]["a"] == "    tsr_dma_copy(l1 + 0, in, 1280);"
    assert res["diffs"][0]["b"] == "    tsr_dma_copy(l1 + 0, in, 1288);"
    assert cb.detail_lines(res)[1] == "    new: '    tsr_dma_copy(l1 + 0, in, 1288);'"


def test_wall_clock_fields_are_stripped_and_counts_are_not(tmp_path):
    # host-ns: wall time, so two builds differ there only
    a = write_tree(tmp_path / "a", rep=report("host-ns", (1000, 2500)))
    b = write_tree(tmp_path / "b", rep=report("host-ns", (1170, 2311)))
    assert cb.compare_build(a, b)["status"] == "identical"
    # the same numbers as QEMU instructions (or GVSoC cycles) are deterministic: compared
    for method in ("qemu-instructions", "gvsoc-cycles"):
        a = write_tree(tmp_path / method / "a", rep=report(method, (1000, 2500)))
        b = write_tree(tmp_path / method / "b", rep=report(method, (1000, 2501)))
        res = cb.compare_build(a, b)
        assert res["status"] == "differs" and res["diffs"][0]["file"] == "report.json"
    # a host-ns report still compares everything that is not a time
    rep = report("host-ns")
    rep["layers"][1]["macs"] += 1
    b = write_tree(tmp_path / "c", rep=rep)
    a = write_tree(tmp_path / "d", rep=report("host-ns", (5, 6)))
    res = cb.compare_build(a, b)
    assert res["status"] == "differs"
    assert '"macs": 13825' in res["diffs"][0]["b"]


def test_strip_timed_names_what_it_strips():
    rep = report("host-ns")
    stripped = cb.strip_timed(rep)
    assert stripped == ["totals.host_ns", "totals.cost.measured", "layers[0].host_ns", "layers[0].cost.measured",
                        "layers[0].cost.error", "layers[1].host_ns", "layers[1].cost.measured",
                        "layers[1].cost.error"]
    assert rep["layers"][0] == {"name": "l0", "op": "conv2d", "macs": 13824, "cost": {"estimate": 2000}}
    kept = report("qemu-instructions")
    before = copy.deepcopy(kept)
    assert cb.strip_timed(kept) == [] and kept == before


def test_file_missing_on_one_side(tmp_path):
    a = write_tree(tmp_path / "a", rep=report())
    b = write_tree(tmp_path / "b", rep=report())
    os.remove(tmp_path / "b" / "plan" / "conv0.json")
    res = cb.compare_build(a, b)
    assert res["status"] == "differs"
    assert res["line"] == "differs: 1 file, first plan/conv0.json (missing on new)"
    (tmp_path / "b" / "tiling" / "extra.json").write_text("{}\n")
    res = cb.compare_build(a, b)
    assert [(d["file"], d["kind"]) for d in res["diffs"]] == [("plan/conv0.json", "missing_in_b"),
                                                               ("tiling/extra.json", "missing_in_a")]


FIT = "dscnn_kws on stm32f4: flash: 1.20 MB of weights do not fit (0.45 MB)"


def test_failures(tmp_path):
    partial = {"tiling/conv0.json": '{"tile": [8, 8, 8]}\n'}
    a = write_tree(tmp_path / "a", 2, FIT, files=partial)
    b = write_tree(tmp_path / "b", 2, FIT, files=partial)
    res = cb.compare_build(a, b)
    assert res["status"] == "failed_both_same"
    assert res["line"] == f"failed on both with the same error (1 common files identical): {FIT}"
    # the same error, but a file both sides wrote before it differs
    (tmp_path / "b" / "tiling" / "conv0.json").write_text('{"tile": [8, 8, 4]}\n')
    assert cb.compare_build(a, b)["status"] == "differs"
    c = write_tree(tmp_path / "c", 2, FIT.replace("1.20", "1.21"), files=partial)
    assert cb.compare_build(a, c)["status"] == "failed_both_differ"
    ok = write_tree(tmp_path / "ok", rep=report())
    res = cb.compare_build(ok, a)
    assert (res["status"], res["line"]) == ("failed_one", f"failed on new only: {FIT}")
    assert cb.compare_build(a, ok)["line"] == f"failed on base only: {FIT}"
    assert cb.compare_build(ok, str(tmp_path / "never"))["status"] == "missing"


def test_error_line_and_places():
    out = "scons: Building targets ...\ntessera: tile conv0\n"
    err = "warning: x\ntessera: error: /w/out/host/m.yaml: input: unknown key 'sed'\nscons: building terminated\n"
    assert cb.error_line(out, err) == "/w/out/host/m.yaml: input: unknown key 'sed'"
    assert cb.error_line("", "Traceback ...\nKeyError: 'x'\n") == "KeyError: 'x'"
    places = {"/w": "<work>", "/w/out": "<out>", "/c": "<checkout>"}
    assert cb.unplace("/w/out/host/m.yaml and /w/models/m.yaml", places) == "<out>/host/m.yaml and <work>/models/m.yaml"


def test_command_line_on_stored_trees(tmp_path, capsys):
    base, new = tmp_path / "base", tmp_path / "new"
    for side in (base, new):
        write_tree(side / "host__tiny", rep=report())
        write_tree(side / "stm32f4__mbv2_035_128", 2, FIT, files={})
    argv = ["--base-trees", str(base), "--new-trees", str(new), "--only", "host/tiny", "--only", "stm32f4/mbv2*"]
    assert cb.main(argv[:4] + ["--only", "host/tiny"]) == 0
    assert cb.main(argv) == 1     # stm32f4/mbv2_035_128/fusion=none etc. were never stored
    out = capsys.readouterr().out.splitlines()
    assert out[:5] == [f"base: stored trees {base} (commit ?)", f"new: stored trees {new} (commit ?)",
                       "host/tiny  identical (7 files)", "", "1 builds: 1 identical"]
    lines = {line.split()[0]: line for line in out[7:] if line.strip()}
    assert "failed on both with the same error (0 common files identical)" in lines["stm32f4/mbv2_035_128"]
    assert "not built on base" in lines["stm32f4/mbv2_035_128/direct=0"]
    (new / "host__tiny" / "src" / "conv0.c").write_text(CONV + "/* end */\n")
    assert cb.main(argv[:4] + ["--only", "host/tiny"]) == 1
    out = capsys.readouterr().out.splitlines()[2:]
    assert out[:3] == ["host/tiny  differs: 1 file, first src/conv0.c line 8", "    base: ''", "    new: '/* end */'"]


def test_the_issue25_matrix():
    builds = cb.matrix_issue25()
    names = [b.name for b in builds]
    assert len(set(names)) == len(names) and len({b.key for b in builds}) == len(builds)
    on_host = {b.model for b in builds if b.target == "host" and b.model_text is None}
    assert on_host == {f[:-5] for f in os.listdir(os.path.join(ROOT, "models")) if f.endswith(".yaml")}
    for target in ("gap8", "stm32h7", "stm32f4"):
        for model in ("tiny", "mbv1_025_128", "mbv2_035_128", "dscnn_kws"):
            for extra in ("", "/fusion=none", "/overlap=0", "/direct=0"):
                assert f"{target}/{model}{extra}" in names
    assert any(b.target == "stm32h7" and any(v.startswith("ram_cap=") for v in b.variables) for b in builds)
    assert "stm32f746_sd/vgg16_64" in names
    written = [b for b in builds if b.model_text is not None]
    assert any("tflite:" in b.model_text for b in written)
    assert any("kind: dory" in b.model_text for b in written)
    assert any("kind: deeploy" in b.model_text for b in written)
    assert cb.select(builds, ["stm32h7/*ram_cap*"]) == [b for b in builds if "ram_cap" in b.name]


def test_bad_arguments(tmp_path, capsys):
    assert cb.main(["--only", "no-such-build", "--list"]) == 2
    assert cb.main([]) == 2
    assert cb.main(["--base-trees", str(tmp_path / "nowhere"), "--new-trees", str(tmp_path)]) == 2
    with pytest.raises(SystemExit, match="neither a directory nor a git ref"):
        cb.main([str(tmp_path / "nowhere"), "--only", "host/tiny", "--work", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert "no build of the issue25 matrix matches" in err and "no such folder of stored trees" in err


def test_schedule_builds_a_model_first_alone():
    # host/m1 and gap8/m1 share the side's model cache: gap8/m1 waits for
    # host/m1 to end, while host/m2 (another model) runs beside it
    events, m2_started = [], threading.Event()

    def run(side, build):
        events.append(("start", build.name))
        if build.name == "host/m2":
            m2_started.set()
        if build.name == "host/m1":
            assert m2_started.wait(10)
        events.append(("end", build.name))

    side = cb.Side("new", "x")
    tasks = [(side, cb.Build("host", "m1")), (side, cb.Build("gap8", "m1")), (side, cb.Build("host", "m2"))]
    cb.schedule(tasks, 2, run)
    assert len(events) == 6
    assert events.index(("start", "gap8/m1")) > events.index(("end", "host/m1"))
    assert events.index(("start", "host/m2")) < events.index(("end", "host/m1"))
    # one job: the matrix order
    events.clear()
    cb.schedule(tasks, 1, run=lambda side, build: events.append(build.name))
    assert events == ["host/m1", "gap8/m1", "host/m2"]


def test_the_manifest_adds_a_later_run_to_its_side(tmp_path):
    side = cb.Side("base", "923390f")
    side.commit = "923390f" + "0" * 33
    write_tree(tmp_path / "host__tiny", rep=report())
    cb.write_manifest(str(tmp_path), side, "issue25", [cb.Build("host", "tiny")])
    write_tree(tmp_path / "gap8__tiny", 2, FIT, files={})
    cb.write_manifest(str(tmp_path), side, "issue25", [cb.Build("gap8", "tiny"), cb.Build("gap8", "dscnn_kws")])
    data = cb.read_manifest(str(tmp_path))
    assert data["commit"] == side.commit and data["side"] == "923390f"
    assert data["builds"] == {"gap8__tiny": {"build": "gap8/tiny", "returncode": 2, "seconds": 1.0, "files": 0},
                              "host__tiny": {"build": "host/tiny", "returncode": 0, "seconds": 1.0, "files": 7}}
    assert cb.Side("base", trees=str(tmp_path)).describe() == f"base: stored trees {tmp_path} (commit 923390f000)"
    ref = cb.Side("new", "s6-arch")
    ref.checkout, ref.commit = str(tmp_path / "gone"), "b5cda95" + "1" * 33     # its worktree already removed
    assert ref.describe() == "new: s6-arch (commit b5cda95111)"
    here = cb.Side("new", str(tmp_path))
    here.checkout, here.commit = str(tmp_path), "c8ce33f+uncommitted"
    assert here.describe() == f"new: {tmp_path} (commit c8ce33f+uncommitted)"
