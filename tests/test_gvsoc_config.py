"""The GVSoC path without GVSoC: the pulp_open targets, the platform's
checks, and the runner's argument patching and error lines."""

import os
import shutil
import subprocess

import pytest
import yaml

from helpers import ROOT
from tessera import config
from tessera.errors import ConfigError, RunError
from tessera.runners import gvsoc


def _load(name):
    return config.load_target(os.path.join(ROOT, "targets", name + ".yaml"), name)


def test_one_core_target_is_pulp_open_with_one_core():
    with open(os.path.join(ROOT, "targets", "pulp_open.yaml")) as f:
        eight = yaml.safe_load(f)
    with open(os.path.join(ROOT, "targets", "pulp_open_1core.yaml")) as f:
        one = yaml.safe_load(f)
    assert (eight["cores"], one["cores"]) == (8, 1)
    for data in (eight, one):
        data.pop("cores")
        data.pop("description")
        data["memory"]["L1"].pop("note")
    assert one == eight
    for name in ("pulp_open", "pulp_open_1core"):
        t = _load(name)
        assert t["runner"]["kind"] == "gvsoc" and t["runner"]["counts"] == "gvsoc-cycles"
        # the tile budget is the same: the stacks are split, not resized
        # (and the HAL's 256 bytes of variables beside them)
        assert config.usable_bytes(t["memory"]["L1"]) == 65536 - 8192 - 256


def test_platform_rejects_impossible_clusters(tmp_path):
    from tessera_scons.platforms import pulp_open as plat

    t = _load("pulp_open")
    assert plat.arch(t)["symbols"]["__cl_stack_size"] == "1024"
    assert plat.arch(_load("pulp_open_1core"))["symbols"]["__cl_stack_size"] == "8192"
    with pytest.raises(ConfigError, match="cores: 9"):
        plat.arch(dict(t, cores=9))
    small = dict(t, memory=dict(t["memory"], L1=dict(t["memory"]["L1"], reserved={"stacks": 1024})))
    with pytest.raises(ConfigError, match="reserved.stacks: 1024 bytes for 8 cores"):
        plat.arch(small)


def test_gvsoc_is_the_users_own_from_the_variable_then_path(monkeypatch, tmp_path):
    """$TESSERA_GVSOC first, else `gvsoc` on PATH; never a copy beside the
    checkout (a folder no user has)."""
    on_path, named = tmp_path / "bin", tmp_path / "opt"
    for d in (on_path, named):
        d.mkdir()
        (d / "gvsoc").write_text("#!/bin/sh\n")
        (d / "gvsoc").chmod(0o755)
    monkeypatch.delenv(gvsoc.ENV, raising=False)
    monkeypatch.setenv("PATH", str(on_path))
    assert gvsoc.locate() == str(on_path / "gvsoc")
    monkeypatch.setenv(gvsoc.ENV, str(named / "gvsoc"))
    assert gvsoc.locate() == str(named / "gvsoc")
    monkeypatch.setenv(gvsoc.ENV, str(named / "nothing"))
    with pytest.raises(RunError, match="TESSERA_GVSOC=.*nothing: not an executable file"):
        gvsoc.locate()
    monkeypatch.delenv(gvsoc.ENV)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gvsoc.locate() is None


def test_missing_gvsoc_is_one_line_saying_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(gvsoc.ENV, raising=False)
    runner = dict(_load("pulp_open")["runner"])
    with pytest.raises(RunError) as exc:
        gvsoc.run(runner, str(tmp_path / "firmware.elf"), [], 10)
    msg = str(exc.value)
    assert "`gvsoc` is not on PATH and TESSERA_GVSOC is not set" in msg and "docs/gvsoc.md" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("text,expected", [
    ("TSR layer 0 conv0 fnv=1 count=2 dma=3\n\nTSR fault: exception on cluster 00000000 core 00000003 at pc "
     "0x1c0104f2 (mtval 0x00000000)\nInput error: Platform returned an error (exitcode: 3)\n",
     "the firmware faulted: exception on cluster 00000000 core 00000003 at pc 0x1c0104f2 (mtval 0x00000000) "
     "(riscv64-unknown-elf-addr2line -e firmware.elf 0x1c0104f2)"),
    ("before\n37903978: 2730: [\x1b[31m/chip/cluster/pe0/lsu                  \x1b[0m] Invalid access "
     "(pc: 0x1c0101ac, offset: 0x50000000, size: 0x4, is_write: 0)\n",
     "invalid read from address 0x50000000 at pc 0x1c0101ac (GVSoC: /chip/cluster/pe0/lsu)"),
    ("TSR layer 0 conv0 fnv=1 count=2 dma=3\nInput error: Platform returned an error (exitcode: 7)\n",
     "the firmware exited with status 7 (last output: TSR layer 0 conv0 fnv=1 count=2 dma=3)"),
    ("nothing useful\n", None),
])
def test_failures_are_named(text, expected):
    assert gvsoc.explain(text) == expected


def _tiny_elf(tmp_path, body):
    cc = "riscv64-unknown-elf-gcc"
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} not installed (apt-get install gcc-riscv64-unknown-elf)")
    src = tmp_path / "t.c"
    src.write_text(body + "\nvoid _start(void) { for (;;) ; }\n")
    elf = tmp_path / "t.elf"
    subprocess.run([cc, "-march=rv32imc", "-mabi=ilp32", "-nostdlib", "-o", str(elf), str(src)], check=True)
    return str(elf)


def test_arguments_go_into_a_copy_of_the_elf(tmp_path):
    elf = _tiny_elf(tmp_path, '__attribute__((section(".data.tsr_cmdline"), used)) char tsr_cmdline[32] = {0};'
                              '\nchar other[8] = "abc";')
    with open(elf, "rb") as f:
        before = f.read()
    out = tmp_path / "run"
    out.mkdir()
    patched = gvsoc.with_args(elf, ["dump=12", "x"], str(out))
    with open(elf, "rb") as f:
        assert f.read() == before
    with open(patched, "rb") as f:
        after = f.read()
    offset, size = gvsoc._symbol_file_range(after, "tsr_cmdline", patched)
    assert size == 32
    assert after[offset:offset + 10] == b"dump=12 x\0"
    # nothing else changed
    assert after[:offset] == before[:offset] and after[offset + 10:] == before[offset + 10:]
    with pytest.raises(RunError, match="do not fit the 32-byte command line"):
        gvsoc.with_args(elf, ["y" * 40], str(out))


def test_arguments_need_the_pulp_open_hal(tmp_path):
    elf = _tiny_elf(tmp_path, "char other[8] = \"abc\";")
    with pytest.raises(RunError, match="no `tsr_cmdline` buffer"):
        gvsoc.with_args(elf, ["dump=1"], str(tmp_path))


def test_isa_extensions_say_which_kernel_path_is_built():
    """pulp_open and gap8_gvsoc build the Xpulp path; gap8 (QEMU, which
    executes no Xpulp) keeps the portable one; gap8_gvsoc has GAP8's sizes."""
    from tessera import config

    assert config.isa_defines(_load("pulp_open")) == ["TSR_ISA_XPULPV2"]
    assert config.isa_defines(_load("pulp_open_1core")) == ["TSR_ISA_XPULPV2"]
    assert config.isa_defines(_load("gap8_gvsoc")) == ["TSR_ISA_XPULPV2"]
    assert config.isa_defines(_load("gap8")) == []
    gap8, stand_in = _load("gap8"), _load("gap8_gvsoc")
    for level in ("L1", "L2"):
        assert stand_in["memory"][level]["size"] == gap8["memory"][level]["size"]
    assert stand_in["place"] == gap8["place"]
    assert stand_in["runner"]["kind"] == "gvsoc"


def test_xpulp_under_qemu_or_an_unknown_extension_is_one_line(tmp_path):
    from tessera.config import load_yaml, parse_target

    data = load_yaml(os.path.join(ROOT, "targets", "gap8.yaml"))
    data["toolchain"]["isa"] = ["xpulpv2"]
    with pytest.raises(ConfigError) as exc:
        parse_target(data, "gap8.yaml", "gap8")
    assert "toolchain.isa: xpulpv2 with a qemu runner" in str(exc.value) and "\n" not in str(exc.value)
    data["toolchain"]["isa"] = ["xpulpv3"]
    with pytest.raises(ConfigError) as exc:
        parse_target(data, "gap8.yaml", "gap8")
    assert "xpulpv3" in str(exc.value) and "\n" not in str(exc.value)
