"""tessera as an installed package, the way a user gets it: a wheel built
from this checkout (pyproject.toml), installed into a fresh virtual
environment outside the checkout (its dependencies borrowed from the
checkout's .venv through a .pth file, so nothing is downloaded). From
there: the `tessera` command, a build from site-packages alone, the SCons
sample loading the installed tool, and the CMake sample whose
tessera_add_network regenerates the network inside `cmake --build` (Ninja
and Make), each run under QEMU against the golden model."""

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import types
import zipfile

import pytest

from helpers import MODEL_CACHE, ROOT, one_error, scons
from test_build_host import tree_files
from test_embed import QEMU, digests, golden_output, needs_cmake_cross, run, shrink_l1, target_copy


def tiled_target_copy(tmp_path):
    """stm32h7.yaml copied with its layers tiled (`direct: none`): the target
    runs tiny's layers in place by default, and then L1's size changes no
    generated file."""
    path = target_copy(tmp_path)
    text = path.read_text()
    assert "\ndirect: flat\n" in text
    path.write_text(text.replace("\ndirect: flat\n", "\ndirect: none\n"))
    return path


def _env():
    """The user's environment: nothing pointing into the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TESSERA_GVSOC")}
    env["TESSERA_MODEL_CACHE"] = MODEL_CACHE   # the generated ONNX models the tests share
    return env


def sh(cmd, cwd=None, check=True):
    res = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, env=_env())
    if check:
        assert res.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


@pytest.fixture(scope="module")
def pkg(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("package")
    sh([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
        "-w", tmp / "dist", ROOT])
    wheel, = (tmp / "dist").glob("tessera-*.whl")
    venv = tmp / "venv"
    sh([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    site = sh([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    with open(os.path.join(site, "checkout-dependencies.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    sh([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel])
    return types.SimpleNamespace(wheel=wheel, venv=venv, python=python, site=site,
                                 tessera=venv / "bin" / "tessera", tmp=tmp)


def test_the_wheel_holds_the_library_the_glue_and_the_data(pkg):
    names = set(zipfile.ZipFile(pkg.wheel).namelist())
    for name in ("tessera/__init__.py", "tessera/cli/build.py", "tessera/api.py", "tessera_scons/stages.py",
                 "tessera_scons/site_tools/tessera.py", "tessera_scons/sconstruct/SConstruct",
                 "tessera/data/targets/stm32h7.yaml", "tessera/data/models/tiny.yaml",
                 "tessera/data/kernels/cmsis_nn/library.yaml", "tessera/data/kernels/hal/cortexm/hal.c",
                 "tessera/data/cmake/tessera-config.cmake", "tessera/data/cmake/tessera.cmake"):
        assert name in names, name
    tracked = subprocess.run(["git", "ls-files", "kernels", "targets", "models", "cmake"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    assert {"tessera/data/" + p for p in tracked} <= names
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "generated/", "tools/"))]


def test_the_command_and_its_help(pkg):
    for args in ([], ["build"], ["list"], ["diff"], ["sweep"]):
        out = sh([pkg.tessera, *args, "--help"]).stdout
        assert out.startswith("usage: tessera"), out
    assert "build" in sh([pkg.tessera, "--help"]).stdout and "diff" in sh([pkg.tessera, "--help"]).stdout
    listing = sh([pkg.tessera, "list"]).stdout
    assert "stm32h7" in listing and "mbv1_025_128" in listing
    cmake_dir = sh([pkg.tessera, "--cmake-dir"]).stdout.strip()
    assert cmake_dir.startswith(pkg.site) and os.path.isfile(os.path.join(cmake_dir, "tessera-config.cmake"))
    tools = sh([pkg.tessera, "--scons-tool-dir"]).stdout.strip()
    assert tools.startswith(pkg.site) and os.path.isfile(os.path.join(tools, "tessera.py"))
    where = sh([pkg.python, "-c", "import tessera, tessera_scons; print(tessera.__file__, tessera_scons.__file__)"])
    assert all(p.startswith(pkg.site) for p in where.stdout.split())
    # bad input is one line and a non-zero status, from the command as from scons
    line = one_error(sh([pkg.tessera, "build", "--target", "stm32h9", "--model", "tiny"], cwd=pkg.tmp, check=False))
    assert "target=stm32h9: unknown target" in line
    line = one_error(sh([pkg.tessera, "build", "--target", "host", "--model", "tiny", "fusion"], cwd=pkg.tmp,
                        check=False))
    assert "fusion: not a variable" in line
    line = one_error(sh([pkg.tessera, "diff", pkg.tmp, pkg.tmp], cwd=pkg.tmp, check=False))
    assert "report.json" in line


@pytest.mark.qemu
def test_tessera_build_from_site_packages_equals_the_checkouts(pkg, tmp_path):
    """`tessera build` in a folder outside the checkout: the bundled target
    and model from site-packages, the run under QEMU bit-exact, the same
    generated files as the checkout's own build."""
    needs_cmake_cross()
    work = tmp_path / "work"
    work.mkdir()
    res = sh([pkg.tessera, "build", "--target", "stm32h7", "--model", "tiny"], cwd=work)
    net = work / "generated" / "stm32h7" / "tiny"
    assert (net / ".passed").exists() and "tiny on stm32h7: PASS" in res.stdout
    scons("target=stm32h7", "model=tiny", out=tmp_path / "checkout", check=True)
    mine, theirs = tree_files(net), tree_files(tmp_path / "checkout" / "stm32h7" / "tiny")
    compared = [n for n in mine if n.startswith(("src/", "tiling/", "plan/")) or n in ("memplan.json", "schedule.json")]
    assert len(compared) > 20 and sorted(compared) == sorted(n for n in theirs if n in compared)
    assert [n for n in compared if not filecmp.cmp(mine[n], theirs[n], shallow=False)] == []
    # the Python API: the same build again (nothing to do), its report
    out = sh([pkg.python, "-c", "from tessera import api; b = api.build('stm32h7', 'tiny', quiet=True); "
              "r = api.read_report('generated/stm32h7/tiny'); t = api.load_target('stm32h7'); "
              "print(b.passed, b.report == r, r['verdict'], len(r['layers']), t['memory']['L1']['size'], "
              "'tessera: tile' in b.output, b.output.splitlines()[-1].split(':')[1])"], cwd=work).stdout.split()
    assert out == ["True", "True", "pass", "9", "131072", "False", "PASS", "tiny", "on", "stm32h7"]


def compiled_by_scons(log):
    return sorted(m.group(1) for m in re.finditer(r"^arm-none-eabi-gcc -o (\S+)\.o -c ", log, re.M))


def run_app(elf, vectors):
    """The sample app under QEMU on the golden input; (output hex, top class,
    instructions) and whether it said its output matches the expected file."""
    out = run(QEMU + ["-semihosting-config",
                      f"enable=on,target=native,arg={vectors / 'input0.bin'},arg={vectors / 'output0.bin'}",
                      "-kernel", elf])
    hexes = re.search(r"^app: output ([0-9a-f]+)$", out, re.M)
    top = re.search(r"^app: top class (\d+)", out, re.M)
    count = re.search(r"^app: (\d+) instructions", out, re.M)
    assert hexes and top and count and "app: output matches" in out, out
    return hexes.group(1), int(top.group(1)), int(count.group(1))


@pytest.mark.qemu
def test_scons_sample_loads_the_installed_tool(pkg, tmp_path):
    """examples/scons_firmware with the installed package: its SConstruct
    loads the tool by tessera.scons_tool_dir(), builds the network in its
    own build, and an L1 change recompiles only the layers it touched."""
    needs_cmake_cross()
    yaml_path = tiled_target_copy(tmp_path)
    fw = tmp_path / "fw"
    shutil.copytree(os.path.join(ROOT, "examples", "scons_firmware"), fw)
    netdir = fw / "build" / "tessera" / "stm32h7" / "tiny"
    vectors = netdir / "export" / "test"
    scons_ = [pkg.python, "-m", "SCons", "-C", fw, f"target={yaml_path}", "model=tiny"]
    res = sh(scons_ + ["build/app.elf", "build/tessera/stm32h7/tiny/export/test"])
    first = compiled_by_scons(res.stdout)
    assert "build/main" in first and "build/tessera/stm32h7/tiny/obj/conv2" in first
    # the app, not tessera's test firmware: nothing was run or linked for it
    assert not (netdir / "firmware.elf").exists() and not (netdir / "run.log").exists()
    want = golden_output(netdir)
    got_hex, top, instructions = run_app(fw / "build" / "app.elf", vectors)
    assert (got_hex, top) == want and instructions > 0

    before = digests(netdir / "src")
    shrink_l1(yaml_path)
    res = sh(scons_)
    after = digests(netdir / "src")
    library = [n for n in after if n not in ("harness.c", "input.c")]
    changed = sorted(n for n in library if after[n] != before[n])
    assert changed and len(changed) < len(library), changed
    assert compiled_by_scons(res.stdout) == sorted(f"build/tessera/stm32h7/tiny/obj/{n[:-2]}" for n in changed)
    assert "-o build/app.elf" in res.stdout
    assert run_app(fw / "build" / "app.elf", vectors)[:2] == want
    assert "is up to date" in sh(scons_).stdout
    line = one_error(sh([pkg.python, "-m", "SCons", "-C", fw, "target=stm32h9"], check=False))
    assert "target=stm32h9: unknown target" in line


def compiled_by_cmake(log):
    """The network's and the app's sources CMake compiled."""
    return sorted(os.path.basename(m.group(1)) for m in re.finditer(r"Building C object \S+?/(\S+)\.obj", log))


GENERATORS = [pytest.param("Ninja", marks=pytest.mark.skipif(shutil.which("ninja") is None, reason="needs ninja")),
              "Unix Makefiles"]


@pytest.mark.qemu
@pytest.mark.parametrize("generator", GENERATORS)
def test_cmake_sample_regenerates_inside_the_build(pkg, tmp_path, generator):
    """examples/cmake_firmware with the installed package: find_package and
    tessera_add_network; the firmware runs bit-exact; a smaller L1 in the
    target YAML and `cmake --build` regenerates, recompiles only the
    layers whose files changed, relinks and still matches; then nothing is
    left to do. With Make the network is a copy of tiny under another name:
    the firmware's C names come from the build."""
    needs_cmake_cross()
    yaml_path = tiled_target_copy(tmp_path)
    model = "tiny"
    if generator != "Ninja":
        (tmp_path / "models").mkdir()
        model = str(tmp_path / "models" / "sensor.yaml")
        shutil.copy(os.path.join(ROOT, "models", "tiny.yaml"), model)
    fw = tmp_path / "fw"
    shutil.copytree(os.path.join(ROOT, "examples", "cmake_firmware"), fw)
    build = fw / "build"
    cmake_dir = sh([pkg.tessera, "--cmake-dir"]).stdout.strip()
    sh(["cmake", "-S", fw, "-B", build, "-G", generator, f"-DCMAKE_TOOLCHAIN_FILE={fw / 'cmake' / 'arm-none-eabi.cmake'}",
        f"-DCMAKE_PREFIX_PATH={cmake_dir}", f"-DTESSERA_TARGET={yaml_path}", f"-DTESSERA_MODEL={model}"])
    name = os.path.basename(model).replace(".yaml", "")
    netdir = build / "tessera" / "stm32h7" / name
    src = netdir / "export" / "src"
    first = sh(["cmake", "--build", build]).stdout
    assert "main.c" in compiled_by_cmake(first) and f"tessera: network network ({name} on stm32h7)" in first
    assert f"{name}_run" in (netdir / "export" / "include" / name / "network.h").read_text()
    want = golden_output(netdir)
    got_hex, top, instructions = run_app(build / "app.elf", netdir / "export" / "test")
    assert (got_hex, top) == want and instructions > 0

    before = digests(src)
    header = digests(netdir / "export" / "include" / name, "*.h")
    shrink_l1(yaml_path)
    second = sh(["cmake", "--build", build]).stdout
    after = digests(src)
    changed = sorted(n for n in after if after[n] != before[n])
    assert changed and len(changed) < len(after), changed
    assert digests(netdir / "export" / "include" / name, "*.h") == header
    # only the changed files recompile (the others keep their timestamps), then the link
    assert compiled_by_cmake(second) == changed, second
    assert "Linking C executable app.elf" in second
    assert run_app(build / "app.elf", netdir / "export" / "test")[:2] == want

    third = sh(["cmake", "--build", build]).stdout
    if generator == "Ninja":
        assert "ninja: no work to do." in third
        return
    assert not re.search(r"Building|Linking|tessera: network|Re-running", third), third

    # another build variable (OPTIONS): Make regenerates too, and min_transfer fuses the steps
    # min_latency keeps apart on this target (its cost model prices them slower fused)
    assert json.loads((netdir / "schedule.json").read_text())["policy"] == "min_latency"
    sh(["cmake", "-S", fw, "-B", build, "-DTESSERA_OPTIONS=fusion=min_transfer"])
    before = digests(src)
    fourth = sh(["cmake", "--build", build]).stdout
    after = digests(src)
    changed = sorted(n for n in after if after[n] != before[n])
    sched = json.loads((netdir / "schedule.json").read_text())
    fused = {f"{n}.c" for step in sched["steps"] if step["kind"] != "layer" for n in step["layers"]}
    assert sched["policy"] == "min_transfer" and fused
    assert "tessera: network" in fourth and fused <= set(changed) and compiled_by_cmake(fourth) == changed, fourth
    assert run_app(build / "app.elf", netdir / "export" / "test")[:2] == want


def test_cmake_with_an_unknown_target_stops_at_configure_in_one_line(pkg, tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(app C)\nfind_package(tessera REQUIRED)\n"
        "tessera_add_network(net TARGET stm32h9 MODEL tiny)\n")
    cmake_dir = sh([pkg.tessera, "--cmake-dir"]).stdout.strip()
    res = sh(["cmake", "-S", app, "-B", app / "build", f"-DCMAKE_PREFIX_PATH={cmake_dir}"], check=False)
    assert res.returncode != 0
    assert "tessera_add_network(net): tessera: error: target=stm32h9: unknown target" in res.stderr
    assert "Traceback" not in res.stderr + res.stdout
