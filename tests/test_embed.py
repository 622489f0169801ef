"""A network embedded in someone else's firmware: the export (CMake files,
manifest, linker fragment), what a re-export rewrites after an L1 change
(and what --debug=explain says), two exported networks in one CMake
project, and a build cache shared by two checkouts. The sample firmware
repositories in examples/, built with the installed package:
tests/test_package.py."""

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from helpers import ROOT, scons
from test_build_host import tree_files

from tessera.util import canon
from tessera.export import files as tx

QEMU = ["qemu-system-arm", "-M", "mps2-an500", "-nographic", "-icount", "shift=0"]


def needs_cmake_cross():
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm", "cmake"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (with picolibc for arm-none-eabi-gcc)")


def run(cmd, cwd=None, env=None):
    res = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                         env=dict(os.environ, **(env or {})))
    assert res.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout + res.stderr


def target_copy(tmp_path):
    """targets/stm32h7.yaml copied (same name, so the same output folder)."""
    d = tmp_path / "targets"
    d.mkdir()
    shutil.copy(os.path.join(ROOT, "targets", "stm32h7.yaml"), d / "stm32h7.yaml")
    return d / "stm32h7.yaml"


def shrink_l1(yaml_path, size=8192):
    """L1 down to `size` bytes (4 kB of it the stack): conv2's tile no
    longer fits, the other layers' do."""
    text = yaml_path.read_text()
    new = re.sub(r"(\n  L1:\n    size: )\d+", rf"\g<1>{size}", text)
    assert new != text
    yaml_path.write_text(new)


def golden_output(netdir):
    """(output bytes as hex, top class) of the golden model."""
    from tessera.check.verdict import stored_bytes

    graph = canon.read_json(netdir / "graph.json")
    name = graph["outputs"][0]
    golden = canon.load_npz(str(netdir / "golden.npz"))[name]
    return stored_bytes(golden, graph["tensors"][name]["dtype"]).hex(), int(np.argmax(golden.reshape(-1)))


def digests(folder, pattern="*.c"):
    return {p.name: canon.file_digest(p) for p in sorted(folder.glob(pattern))}


# ---- the export's files, as text -------------------------------------------

def test_sections_and_fragment_follow_the_generated_c():
    c = ['const int8_t w[4] __attribute__((aligned(4), section(".rodata.tsr.flash"))) = {0};',
         'int8_t a[8] __attribute__((aligned(8), section(".bss.tsr.L2")));',
         'int8_t t[8] __attribute__((aligned(8), section(".bss.tsr.L1")));']
    secs = tx.sections(c)
    assert [s["name"] for s in secs] == [".rodata.tsr.flash", ".bss.tsr.L1", ".bss.tsr.L2"]
    text = tx.fragment({"model": "m", "target": "t"}, secs)
    assert ".rodata.tsr.flash : ALIGN(8) { *(.rodata.tsr.flash) } > TSR_flash" in text
    assert ".bss.tsr.L1 (NOLOAD) : ALIGN(8) { *(.bss.tsr.L1) } > TSR_L1" in text
    assert 'REGION_ALIAS("TSR_L2", <your region for L2>);' in text


def test_kernel_digest_changes_with_any_file():
    lib = {"target": "tessera_kernels_x", "sources": ["kernels/x/a.c"], "files": ["kernels/x/a.c", "kernels/x/a.h"],
           "defines": [], "options": []}
    base = tx.kernel_digest(lib, {"kernels/x/a.c": b"int a;", "kernels/x/a.h": b""})
    assert tx.kernel_digest(lib, {"kernels/x/a.c": b"int a;", "kernels/x/a.h": b"#define X"}) != base
    assert tx.kernel_digest(dict(lib, defines=["N=2"]), {"kernels/x/a.c": b"int a;", "kernels/x/a.h": b""}) != base


def test_export_is_identical_across_output_folders_and_j(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    scons("target=stm32h7", "model=tiny", "export", out=a, check=True)
    scons("-j2", "target=stm32h7", "model=tiny", "export", out=b, check=True)
    fa, fb = tree_files(a / "stm32h7" / "tiny" / "export"), tree_files(b / "stm32h7" / "tiny" / "export")
    assert sorted(fa) == sorted(fb) and "CMakeLists.txt" in fa and tx.MANIFEST in fa
    assert [n for n in fa if not filecmp.cmp(fa[n], fb[n], shallow=False)] == []


# ---- CMake ------------------------------------------------------------------

def cmake_generator():
    return ["-G", "Ninja"] if shutil.which("ninja") else ["-G", "Unix Makefiles"]


def compiled_by_cmake(log):
    """<target>.dir/<source> of every file CMake compiled."""
    return sorted(m.group(1).split("CMakeFiles/", 1)[1] for m in re.finditer(r"Building C object (\S+)\.obj", log))


def test_export_is_self_contained_and_a_reexport_rewrites_only_what_changed(tmp_path):
    """export/ holds no path into tessera's tree or the output folder and no
    glob; after a smaller L1 a re-export rewrites only the files whose
    content changed, and keeps the others' timestamps (what lets Make and
    Ninja recompile only those: tests/test_package.py builds it)."""
    yaml_path = target_copy(tmp_path)
    gen = tmp_path / "gen"
    # tiled (direct=0): stm32h7 runs tiny's layers in place by default, and
    # then L1's size changes no generated file
    scons(f"target={yaml_path}", "model=tiny", "direct=0", "export", out=gen, check=True)
    netdir = gen / "stm32h7" / "tiny"
    exp = netdir / "export"
    for path in tree_files(exp).values():
        with open(path, "rb") as f:
            data = f.read()
        assert ROOT.encode() not in data and str(gen).encode() not in data, path
    cmake_text = (exp / "CMakeLists.txt").read_text() + (exp / tx.KERNELS_CMAKE).read_text()
    assert "GLOB" not in cmake_text and "CMAKE_C_FLAGS" not in cmake_text and "CMAKE_C_COMPILER" not in cmake_text
    assert "add_library(tessera::tiny ALIAS tessera_tiny)" in cmake_text
    assert not (exp / "src" / "harness.c").exists() and not (exp / "src" / "input.c").exists()
    manifest = json.loads((exp / tx.MANIFEST).read_text())
    listed = [manifest["header"], manifest["linker_fragment"]]
    for lib in manifest["libraries"]:
        listed += lib["sources"] + lib["include"]["public"] + lib["include"]["private"]
    assert all((exp / p).exists() for p in listed)
    assert {s["name"] for s in manifest["sections"]} == {".rodata.tsr.flash", ".bss.tsr.L1", ".bss.tsr.L2"}

    files = tree_files(exp)
    before = {n: (canon.file_digest(p), os.stat(p).st_mtime_ns) for n, p in files.items()}
    shrink_l1(yaml_path)
    res = scons(f"target={yaml_path}", "model=tiny", "direct=0", "export", "--debug=explain", out=gen, check=True)
    assert re.search(r"rebuilding `\S+/tiling/conv2\.json' because:\s*\n\s*"
                     r"`\{\"buffering\":2,\"cores\":1,\"l1_budget\":126976\}' is no longer a dependency\s*\n\s*"
                     r"`\{\"buffering\":2,\"cores\":1,\"l1_budget\":4096\}' is a new dependency", res.stdout), \
        res.stdout[-3000:]
    after = {n: (canon.file_digest(p), os.stat(p).st_mtime_ns) for n, p in tree_files(exp).items()}
    assert sorted(after) == sorted(before)
    changed = sorted(n for n in after if after[n][0] != before[n][0])
    sources = [n for n in after if n.startswith("src/")]
    assert changed and "src/conv2.c" in changed and len([n for n in changed if n in sources]) < len(sources)
    assert f"include/tiny/network.h" not in changed
    # the unchanged files keep their timestamps
    assert [n for n in after if n not in changed and after[n][1] != before[n][1]] == []


@pytest.mark.qemu
def test_two_exported_networks_share_the_kernel_targets(tmp_path):
    """Two networks in one CMake project define the kernel and HAL targets
    once; an export whose kernels differ stops CMake with one message."""
    needs_cmake_cross()
    gen = tmp_path / "gen"
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(os.path.join(ROOT, "models", "tiny.yaml"), models / "tiny2.yaml")
    scons("target=stm32h7", "model=tiny", "export", out=gen, check=True)
    scons("target=stm32h7", f"model={models / 'tiny2.yaml'}", "export", out=gen, check=True)
    app = tmp_path / "app"
    app.mkdir()
    shutil.copytree(os.path.join(ROOT, "examples", "cmake_firmware", "cmake"), app / "cmake")
    (app / "main.c").write_text('#include "tiny/network.h"\n#include "tiny2/network.h"\n'
                                "int main(void)\n{\n    tiny_init();\n    tiny2_init();\n    tiny_run();\n"
                                "    tiny2_run();\n    return 0;\n}\n")
    (app / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(two C)\n"
        f"add_subdirectory({gen / 'stm32h7' / 'tiny' / 'export'} tiny)\n"
        f"add_subdirectory({gen / 'stm32h7' / 'tiny2' / 'export'} tiny2)\n"
        "add_library(app STATIC main.c)\ntarget_link_libraries(app PRIVATE tessera::tiny tessera::tiny2)\n")
    toolchain = f"-DCMAKE_TOOLCHAIN_FILE={app / 'cmake' / 'arm-none-eabi.cmake'}"
    run(["cmake", "-S", app, "-B", app / "build", *cmake_generator(), toolchain])
    log = run(["cmake", "--build", app / "build"])
    compiled = compiled_by_cmake(log)
    kernels = [c for c in compiled if c.startswith(("tessera_kernels_", "tessera_hal_"))]
    assert kernels and len(kernels) == len(set(kernels))
    assert any(c.startswith("tessera_tiny2.dir/") for c in compiled)

    # an export from other kernel sources: one clear stop
    other = gen / "stm32h7" / "tiny2" / "export" / tx.KERNELS_CMAKE
    text = other.read_text()
    digest = re.search(r'if\(NOT _tsr_digest STREQUAL "([0-9a-f]+)"\)', text).group(1)
    other.write_text(text.replace(digest, "0" * len(digest)))
    res = subprocess.run(["cmake", "-S", str(app), "-B", str(tmp_path / "b2"), toolchain],
                         capture_output=True, text=True)
    assert res.returncode != 0
    assert "is defined twice with different code" in res.stderr


# ---- the build cache --------------------------------------------------------

def checkout(dest):
    """A copy of this working tree as a colleague's checkout would hold it
    (tracked and new files, nothing ignored: no generated/, no .venv)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = os.path.join(ROOT, rel)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, rel))


@pytest.mark.qemu
def test_a_colleague_fetches_the_generated_steps_from_the_cache(tmp_path):
    needs_cmake_cross()
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k != "TESSERA_MODEL_CACHE"}   # the cache's own models
    logs = {}
    for who in ("alice", "bob"):
        checkout(tmp_path / who)
        res = subprocess.run([sys.executable, "-m", "SCons", "-C", str(tmp_path / who), "target=stm32h7",
                              "model=tiny", f"cache={cache}"], capture_output=True, text=True, env=env)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        logs[who] = res.stdout
    assert "Retrieved" not in logs["alice"] and "tessera: tile" in logs["alice"]
    bob = logs["bob"]
    retrieved = set(re.findall(r"^Retrieved `generated/stm32h7/tiny/(\S+)' from cache$", bob, re.M))
    netdir = tmp_path / "bob" / "generated" / "stm32h7" / "tiny"
    for layer in canon.read_json(netdir / "graph.json")["layers"]:
        assert f"tiling/{layer['name']}.json" in retrieved and f"src/{layer['name']}.c" in retrieved
        assert f"obj/{layer['name']}.o" in retrieved
    assert {"memplan.json", "src/network.c", "link.ld", "firmware.elf", "obj/libtessera_kernels.a"} <= retrieved
    # nothing solved, generated or compiled again; the run is this machine's
    assert "tessera: tile" not in bob and "tessera: generate" not in bob and "tessera: compile" not in bob
    assert "tessera: run generated/stm32h7/tiny/firmware.elf" in bob and "PASS" in bob
    a = tree_files(tmp_path / "alice" / "generated" / "stm32h7" / "tiny")
    b = tree_files(netdir)
    assert sorted(a) == sorted(b)
    assert [n for n in a if not filecmp.cmp(a[n], b[n], shallow=False)] == []
