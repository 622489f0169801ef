"""The GVSoC path (targets/pulp_open.yaml, platform pulp_open): the HAL on
GVSoC's pulp-open chip (cluster boot, fork/join, barrier, mchan DMA,
cycles, arguments, faults), and whole networks built by SCons, run on
GVSoC and checked bit for bit, with cycles per layer.

Needs GVSoC (docs/gvsoc.md: `gvsoc` on PATH, or $TESSERA_GVSOC) and
riscv64-unknown-elf-gcc with picolibc; skips with a clear message otherwise.
Cycle counts are reported, never bounded: only their presence and
consistency are checked.
"""

import filecmp
import os
import re
import shutil
import subprocess

import pytest

from helpers import ROOT, hal_lines, report, scons
from tessera import config, runners
from tessera.check import runlog
from tessera.codegen import linker
from tessera.errors import RunError
from tessera.runners import gvsoc

HAL = os.path.join(ROOT, "kernels", "hal", "pulp_open")
INCLUDE = os.path.join(ROOT, "kernels", "include")
HAL_TEST = os.path.join(ROOT, "tests", "c", "pulp_open_hal_test.c")

# every GVSoC test module's marks (test_gvsoc_hyper.py, test_pulp_nn_gvsoc.py)
GVSOC_MARKS = [
    pytest.mark.gvsoc,
    pytest.mark.skipif(gvsoc.locate() is None,
                       reason="no GVSoC: install it with its pulp-open target (docs/gvsoc.md) and put `gvsoc` on "
                              "PATH, or name it with TESSERA_GVSOC"),
]
pytestmark = GVSOC_MARKS


def _target(name="pulp_open"):
    return config.load_target(os.path.join(ROOT, "targets", name + ".yaml"), name)


def build_firmware(tmp, sources, target):
    """Compile and link C sources with the pulp_open HAL, the target's
    flags and the linker script tessera generates for it."""
    from tessera_scons.platforms import pulp_open as plat

    tc = target["toolchain"]
    if shutil.which(tc["cc"]) is None:
        pytest.skip(f"{tc['cc']} not installed (apt-get install {' '.join(tc['debian'])})")
    script = os.path.join(tmp, "link.ld")
    with open(script, "w") as f:
        f.write(linker.script(linker.view(target, plat.arch(target))))
    elf = os.path.join(tmp, "firmware.elf")
    cmd = [tc["cc"], *tc["cflags"], "--specs=picolibc.specs", "-nostartfiles", "-Wl,--no-warn-rwx-segments",
           "-Wall", "-Wextra", "-Werror", f"-DTSR_NCORES={target['cores']}", "-I", INCLUDE, "-T", script,
           os.path.join(HAL, "crt0.S"), os.path.join(HAL, "hal.c"), *sources, "-o", elf]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stderr}"
    return elf


@pytest.fixture(scope="module")
def hal_elfs(tmp_path_factory):
    elfs = {}
    for name in ("pulp_open", "pulp_open_1core"):
        tmp = str(tmp_path_factory.mktemp(name))
        elfs[name] = build_firmware(tmp, [HAL_TEST], _target(name))
    return elfs


# ---- the HAL -----------------------------------------------------------------

@pytest.mark.parametrize("name,cores", [("pulp_open", 8), ("pulp_open_1core", 1)])
def test_hal_on_the_cluster(hal_elfs, name, cores):
    target = _target(name)
    text = runners.run(target["runner"], hal_elfs[name])
    got = hal_lines(text)
    assert "done" in got, text
    assert got["cores"] == [str(cores)]
    assert got["args"] == []
    # every core ran once, as itself: cluster 0, cores 0..n-1
    assert got["core_ids"] == [str(k + 1) for k in range(cores)]
    assert got["harts"] == [str(k) for k in range(cores)]
    assert got["with_barrier"] == [str(1000 + (k + 1) % cores) for k in range(cores)]
    # per-core cycles follow the work: core k did k + 1 units
    counts = [int(c) for c in got["core_counts"]]
    assert all(c > 0 for c in counts)
    for k in range(1, cores):
        assert counts[k] > counts[k - 1], counts
    for shape in ("dma_1d", "dma_2d", "dma_3d", "dma_rows_contiguous", "dma_l1_strided", "dma_one_job"):
        assert got[shape] == ["0"], (shape, text)
    assert got["dma_bytes"] == ["13040"]
    assert got["counter_increases"] == ["1"]


def test_hal_run_is_deterministic(hal_elfs):
    target = _target()
    assert runners.run(target["runner"], hal_elfs["pulp_open"]) == runners.run(target["runner"],
                                                                               hal_elfs["pulp_open"])


def test_arguments_reach_main_and_the_elf_is_untouched(hal_elfs):
    elf = hal_elfs["pulp_open"]
    with open(elf, "rb") as f:
        before = f.read()
    got = hal_lines(runners.run(_target()["runner"], elf, ["dump=3", "x"]))
    assert got["args"] == ["dump=3", "x"]
    with open(elf, "rb") as f:
        assert f.read() == before


def test_a_fault_is_one_line_naming_the_pc(hal_elfs):
    with pytest.raises(RunError) as exc:
        runners.run(_target()["runner"], hal_elfs["pulp_open"], ["fault"])
    msg = str(exc.value)
    assert "\n" not in msg
    assert "the firmware faulted" in msg and re.search(r"pc 0x1c0[0-9a-f]{5}", msg), msg


def live_simulators():
    """Running (not zombie) GVSoC simulator processes."""
    ps = subprocess.run(["ps", "-eo", "pid=,stat=,comm="], capture_output=True, text=True).stdout
    return {int(p) for p, stat, comm in (line.split(None, 2) for line in ps.splitlines() if line.strip())
            if comm.strip() == "gvsoc_launcher" and not stat.startswith("Z")}


def test_a_hang_is_stopped_by_the_timeout(hal_elfs):
    before = live_simulators()
    with pytest.raises(RunError) as exc:
        runners.run(_target()["runner"], hal_elfs["pulp_open"], ["hang"], timeout=5)
    assert "no result within 5 s" in str(exc.value) and "\n" not in str(exc.value)
    # the simulator (a child of GVSoC's Python launcher) was killed with it
    assert live_simulators() <= before


# ---- whole networks ----------------------------------------------------------

def run_log(out, target, model):
    with open(os.path.join(out, target, model, "run.log")) as f:
        return runlog.parse(f.read(), "run.log")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny", "mbv1_025_128"])
def test_network_on_gvsoc_is_bit_exact_with_cycles(tmp_path, model):
    out = tmp_path / "out"
    scons("-j2", "target=pulp_open", f"model={model}", out=out, check=True)
    rep = report(out, "pulp_open", model)
    assert rep["verdict"] == "pass"
    assert all(layer["match"] for layer in rep["layers"])
    assert rep["counts"]["method"] == "gvsoc-cycles"
    assert "Xpulpv2 path" in rep["counts"]["note"]
    assert rep["kernels"] == {"library": "pulp_nn", "isa": ["xpulpv2"], "path": "xpulpv2"}
    # (the default fusion: a fused step's cycles are all on its first layer)
    second = {g["layers"][1] for g in rep["fusion"].get("groups", [])}
    assert all(layer["cycles"] > 0 for layer in rep["layers"] if layer["name"] not in second)
    assert rep["totals"]["cycles"] >= sum(layer["cycles"] for layer in rep["layers"])
    # the eight cores all worked (cycles inside forks, per core)
    assert len(rep["totals"]["core_counts"]) == 8 and min(rep["totals"]["core_counts"]) > 0
    # the hardware DMA moved the tiles; no core copied
    assert rep["totals"]["dma_bytes"]["cluster_dma"] > 0
    assert rep["totals"]["dma_copy_count"] == 0
    # the link's stack check, in the report: core 0 (two shares) and the other seven
    stacks = {s["who"]: s for s in rep["firmware"]["stacks"]}
    assert [(w, s["bytes"]) for w, s in stacks.items()] == [("core 0", 2048), ("cores 1-7", 864)]
    assert all(0 < s["need"] <= s["bytes"] for s in stacks.values())


@pytest.mark.slow
def test_one_core_and_eight_cores_agree(tmp_path):
    out = tmp_path / "out"
    # layers apart on both: the cost model may fuse differently for one and
    # eight cores, and a fused step's inner output is never checksummed
    for name in ("pulp_open", "pulp_open_1core"):
        scons("target=" + name, "model=tiny", "fusion=none", out=out, check=True)
    one, eight = run_log(out, "pulp_open_1core", "tiny"), run_log(out, "pulp_open", "tiny")
    assert [l["fnv"] for l in one["layers"]] == [l["fnv"] for l in eight["layers"]]
    assert one["outputs"] == eight["outputs"]
    assert report(out, "pulp_open_1core", "tiny")["totals"]["core_counts"] != []


@pytest.mark.slow
def test_dump_run_prints_the_layer(tmp_path):
    """The check step's rerun with `dump=<i>` (how a mismatch is located)
    works on GVSoC: the dumped bytes hash to the layer's checksum."""
    out = tmp_path / "out"
    scons("target=pulp_open", "model=tiny", out=out, check=True)
    fw = os.path.join(out, "pulp_open", "tiny", "firmware.elf")
    res = runlog.parse(runners.run(_target()["runner"], fw, ["dump=2"]), "dump run")
    data = res["dumps"][2]
    h = 2166136261
    for byte in data:
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    assert h == res["layers"][2]["fnv"]


def tree_files(root):
    found = {}
    for d, _, names in os.walk(root):
        for n in names:
            if not n.startswith(".sconsign"):   # SCons's own database holds timestamps
                found[os.path.relpath(os.path.join(d, n), root)] = os.path.join(d, n)
    return found


@pytest.mark.slow
def test_builds_and_cycle_counts_are_deterministic(tmp_path):
    """Two builds, with and without -j, give byte-identical trees: the
    firmware, and GVSoC's run log with every cycle count in it."""
    a, b = tmp_path / "a", tmp_path / "b"
    # different hash seeds: any output that follows set or dict-of-hash order differs every time
    scons("target=pulp_open", "model=tiny", out=a, check=True, env={"PYTHONHASHSEED": "1"})
    scons("-j2", "target=pulp_open", "model=tiny", out=b, check=True, env={"PYTHONHASHSEED": "2"})
    fa, fb = tree_files(a / "pulp_open" / "tiny"), tree_files(b / "pulp_open" / "tiny")
    assert sorted(fa) == sorted(fb)
    with open(fa["run.log"]) as f:
        assert "count=" in f.read()
    differ = [name for name in fa if not filecmp.cmp(fa[name], fb[name], shallow=False)]
    assert differ == []


@pytest.mark.slow
def test_gap8_stand_in_streams_weights_from_l3_bit_exact(tmp_path):
    """gap8_gvsoc: GAP8's memory plan (weights in L3, streamed to L2 chunk by
    chunk) with the Xpulp kernels on GVSoC's pulp-open, bit-exact."""
    out = tmp_path / "out"
    scons("target=gap8_gvsoc", "model=tiny", out=out, check=True)
    rep = report(out, "gap8_gvsoc", "tiny")
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    assert rep["kernels"]["path"] == "xpulpv2"
    assert rep["totals"]["weights_streamed"]["from"] == "L3"
    assert rep["totals"]["weights_streamed"]["bytes"] > 0
    assert rep["memory"]["L2"]["size"] == 512000


@pytest.mark.slow
def test_xpulp_kernels_beside_the_reference_fallback(tmp_path):
    """A MobileNetV3-like block (squeeze-and-excitation mul, hard-swish
    tables, concat, resize: reference kernels) with its convolutions on the
    Xpulp path, on pulp_open: bit-exact."""
    from test_ops_build import model_yaml, passed

    out = tmp_path / "out"
    path = model_yaml(tmp_path, "mbv3")
    scons("target=pulp_open", f"model={path}", out=out, check=True)
    rep = passed(out, "pulp_open", path)
    assert rep["kernels"]["path"] == "xpulpv2"
    assert {"mul", "lut", "depthwise", "pointwise"} <= {layer["op"] for layer in rep["layers"]}
