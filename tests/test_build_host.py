"""End to end on the host: tessera's own SCons build, from model YAML to a
bit-exact run, rebuilt incrementally and deterministically."""

import filecmp
import json
import os
import re

import pytest
import yaml

from helpers import ROOT, one_error, plant_golden_error, report, scons, step_lines


def tree_files(root):
    found = {}
    for d, _, names in os.walk(root):
        for n in names:
            if n.startswith(".sconsign"):
                continue   # SCons's own database holds timestamps
            path = os.path.join(d, n)
            found[os.path.relpath(path, root)] = path
    return found


def test_tiny_builds_runs_and_is_bit_exact(tmp_path):
    out = tmp_path / "out"
    res = scons("target=host", "model=tiny", out=out, check=True)
    rep = report(out, "host", "tiny")
    assert rep["verdict"] == "pass"
    assert all(layer["match"] for layer in rep["layers"])
    assert {"name", "op", "macs", "tile", "l1_bytes", "dma_bytes"} <= set(rep["layers"][0])
    for level in rep["memory"].values():
        assert {"peak", "lower_bound", "size"} <= set(level)
        assert level["peak"] >= level["lower_bound"]
    assert "PASS" in res.stdout
    # a second identical build does nothing
    again = scons("target=host", "model=tiny", out=out, check=True)
    assert "is up to date" in again.stdout
    assert step_lines(again.stdout) == [] and "tessera: PASS tiny on host" in again.stdout


def test_generated_tree_is_deterministic_with_and_without_j(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    # different hash seeds: any output that follows set or dict-of-hash order differs every time
    scons("target=host", "model=tiny", out=a, check=True, env={"PYTHONHASHSEED": "1"})
    scons("-j2", "target=host", "model=tiny", out=b, check=True, env={"PYTHONHASHSEED": "2"})
    fa, fb = tree_files(a / "host" / "tiny"), tree_files(b / "host" / "tiny")
    assert sorted(fa) == sorted(fb)
    differ = [name for name in fa if not filecmp.cmp(fa[name], fb[name], shallow=False)]
    assert differ == []


@pytest.mark.parametrize("model", ["mbv1_128", "mbv2_128", "dscnn_kws"])
def test_bundled_models_pass_on_host(tmp_path, model):
    out = tmp_path / "out"
    scons("-j2", "target=host", f"model={model}", out=out, check=True)
    rep = report(out, "host", model)
    assert rep["verdict"] == "pass"
    assert all(layer["match"] for layer in rep["layers"])
    if model == "mbv1_128":
        # the tiling is really exercised: most layers do not fit L1 whole
        assert sum(layer["tiled"] for layer in rep["layers"]) > len(rep["layers"]) // 2
        assert abs(rep["totals"]["macs"] - 186e6) / 186e6 < 0.01
        assert abs(rep["totals"]["params"] - 4.2e6) / 4.2e6 < 0.02


def host_variant(tmp_path, name, mutate):
    with open(os.path.join(ROOT, "targets", "host.yaml")) as f:
        data = yaml.safe_load(f)
    mutate(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _steps(stdout, verb, suffix):
    """Names of files a build step touched, from SCons's own output."""
    if verb == "generate":
        pat = re.compile(r"^tessera: generate .*/src/([^/\s]+)\.c$")
    else:
        pat = re.compile(r"^tessera: compile .*/obj/([^/\s]+)\.o$")
    return {m.group(1) for line in stdout.splitlines() for m in [pat.match(line)] if m}


def test_l1_change_regenerates_only_layers_whose_tiling_changed(tmp_path):
    out = tmp_path / "out"

    def set_l1(size):
        return lambda d: d["memory"]["L1"].__setitem__("size", size)
    target = host_variant(tmp_path, "myhost", set_l1(64000))
    # overlap=0: with segment overlap a layer's new tile moves its gap, and
    # with it the addresses of other layers (a real change to their code)
    first = scons("-j2", f"target={target}", "model=mbv1_128", "overlap=0", out=out, check=True)
    layers = _steps(first.stdout, "generate", ".c")
    layer_files = {n for n in layers if not n.endswith("_w") and n not in ("network", "harness", "input")}
    assert len(layer_files) == 29

    host_variant(tmp_path, "myhost", set_l1(48000))
    second = scons("-j2", f"target={target}", "model=mbv1_128", "overlap=0", "--debug=explain", out=out, check=True)
    regenerated = _steps(second.stdout, "generate", ".c") & layer_files
    recompiled = _steps(second.stdout, "compile", ".c") & layer_files
    assert 0 < len(recompiled) < len(layer_files)
    assert recompiled <= regenerated
    # only layers whose tiling changed were regenerated, and SCons says why
    tilings_changed = {m.group(1) for m in re.finditer(r"tessera: tile .*/tiling/(\S+)\.json", second.stdout)}
    assert regenerated <= tilings_changed
    assert "l1_budget" in second.stdout and "48000" in second.stdout
    assert report(out, "myhost", "mbv1_128")["verdict"] == "pass"

    # a value no step reads rebuilds nothing
    host_variant(tmp_path, "myhost", lambda d: (set_l1(48000)(d), d.__setitem__("description", "renamed")))
    third = scons(f"target={target}", "model=mbv1_128", "overlap=0", out=out, check=True)
    assert step_lines(third.stdout) == [] and "gcc" not in third.stdout
    assert third.stdout.rstrip().splitlines()[-1].startswith("tessera: PASS mbv1_128 on myhost")


def test_l1_too_small_is_named_and_fixable(tmp_path):
    out = tmp_path / "out"
    # 128 B: a split reduction fits the convolutions, no depthwise tile fits
    target = host_variant(tmp_path, "smallL1", lambda d: d["memory"]["L1"].__setitem__("size", 128))
    line = one_error(scons(f"target={target}", "model=mbv1_025_128", out=out))
    assert re.search(r"layer \w+: smallest tile .* needs \d+ bytes of L1 but only 128", line), line
    assert not os.path.exists(out / "smallL1" / "mbv1_025_128" / "report.json")
    host_variant(tmp_path, "smallL1", lambda d: d["memory"]["L1"].__setitem__("size", 64000))
    scons(f"target={target}", "model=mbv1_025_128", out=out, check=True)
    assert report(out, "smallL1", "mbv1_025_128")["verdict"] == "pass"


def test_l2_too_small_is_named_and_fixable(tmp_path):
    out = tmp_path / "out"
    target = host_variant(tmp_path, "smallL2", lambda d: d["memory"]["L2"].__setitem__("size", 60000))
    line = one_error(scons(f"target={target}", "model=mbv1_025_128", out=out))
    assert "L2" in line and "60000" in line and re.search(r"\d+ bytes", line), line
    host_variant(tmp_path, "smallL2", lambda d: d["memory"]["L2"].__setitem__("size", 512000))
    scons(f"target={target}", "model=mbv1_025_128", out=out, check=True)
    assert report(out, "smallL2", "mbv1_025_128")["verdict"] == "pass"


def test_a_mismatch_names_the_first_layer_and_element(tmp_path):
    """The check step is a real check: against a golden output with one
    element changed, the build fails naming that layer and element."""
    out = tmp_path / "out"
    scons("target=host", "model=tiny", out=out, check=True)
    netdir = out / "host" / "tiny"
    layer = plant_golden_error(netdir, 2, (1, 2, 3))
    line = one_error(scons("target=host", "model=tiny", out=out))
    assert f"layer 2 ({layer['name']}) differs" in line
    assert "[h, w, c] = [1, 2, 3]" in line and "1 of" in line, line
    rep = json.loads((netdir / "report.json").read_text())
    assert rep["verdict"] == "fail" and not rep["layers"][2]["match"] and rep["layers"][1]["match"]
    # report.html shows the failure: the layer and its element, its row highlighted
    page = (netdir / "report.html").read_text()
    assert f"layer 2 {layer['name']} differs" in page and "(h, w, c) = (1, 2, 3)" in page
    assert page.count('<tr class="bad">') == 1
    # and it stays failed: the next build fails again without rerunning anything
    again = scons("target=host", "model=tiny", out=out)
    assert one_error(again) == line
