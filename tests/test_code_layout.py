"""The code layout of a platform whose instruction caches make the cycles
depend on where code sits (pulp_open: tessera.codegen.linker's
code_layout, docs/gvsoc.md "Code layout"): with `each`, every member of the
kernel library starts at a 1 kB boundary, so one kernel's code growing
does not move the next kernels in the caches. Checked on the script text
and with the real cross linker (no GVSoC needed)."""

import os
import re
import shutil
import subprocess

import pytest

from helpers import ROOT
from tessera import config
from tessera.codegen import linker
from tessera_scons.platforms import pulp_open as plat

KERNELS = "*libtessera_kernels.a:"


def _target():
    return config.load_target(os.path.join(ROOT, "targets", "pulp_open.yaml"), "pulp_open")


def test_each_member_of_the_kernel_library_starts_aligned_in_the_script():
    target = _target()
    arch = plat.arch(target)
    assert arch["code_layout"]["each"] == 1024
    text = linker.script(linker.view(target, arch, {KERNELS: ["conv.o", "depthwise.o", "conv.o", "matmul_xpulp.o"]}))
    body = text[text.index(".text :"):text.index("__text_end")]
    lines = [l.strip() for l in body.splitlines() if l.strip()]
    kern = [i for i, l in enumerate(lines) if l.startswith(KERNELS)]
    # one line per member, the archive's order, a repeated name once
    assert [lines[i].split("(")[0][len(KERNELS):] for i in kern] == ["conv.o", "depthwise.o", "matmul_xpulp.o"]
    assert all(lines[i - 1] == ". = ALIGN(1024);" for i in kern)
    # the HAL before them, unaligned; nothing else aligned
    assert lines.index("*/hal/*.o(.text .text.*)") < kern[0]
    assert sum(l == ". = ALIGN(1024);" for l in lines) == 3


def test_without_members_the_library_is_one_line():
    target = _target()
    text = linker.script(linker.view(target, plat.arch(target)))
    assert f"{KERNELS}(.text .text.*)" in text
    assert "ALIGN(1024)" not in text


def _link(tmp, a_body, target):
    """The kernel archive (a.o, b.o) and a main calling both, linked with
    pulp_open's script; {symbol: address}."""
    tc = target["toolchain"]
    cc, ar = tc["cc"], tc["ar"]
    for tool, pkgs in ((cc, tc["debian"]), (ar, tc["debian"])):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (apt-get install {' '.join(pkgs)})")
    os.makedirs(tmp, exist_ok=True)
    src = {"a.c": "int kern_a(int x)\n{\n" + a_body + "    return x;\n}\n",
           "b.c": "int kern_b(int x)\n{\n    return x * 3 + 1;\n}\n",
           "main.c": "int kern_a(int);\nint kern_b(int);\nint main(void)\n{\n    return kern_a(1) + kern_b(2);\n}\n"}
    for name, text in src.items():
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    flags = [*tc["cflags"], "--specs=picolibc.specs", "-ffunction-sections"]
    objs = []
    for name in ("a.c", "b.c", "main.c"):
        obj = os.path.join(tmp, name[:-2] + ".o")
        subprocess.run([cc, *flags, "-c", os.path.join(tmp, name), "-o", obj], check=True)
        objs.append(obj)
    lib = os.path.join(tmp, "libtessera_kernels.a")
    subprocess.run([ar, "rcs", lib, objs[0], objs[1]], check=True)
    script = os.path.join(tmp, "link.ld")
    with open(script, "w") as f:
        f.write(linker.script(linker.view(target, plat.arch(target), {KERNELS: ["a.o", "b.o"]})))
    elf = os.path.join(tmp, "firmware.elf")
    res = subprocess.run([cc, *flags, "-nostartfiles", "-Wl,--gc-sections", "-Wl,--no-warn-rwx-segments",
                          "-Wl,-e,main", "-T", script, objs[2], lib, "-o", elf], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    nm = subprocess.run([cc.replace("gcc", "nm"), elf], capture_output=True, text=True, check=True).stdout
    return {m.group(2): int(m.group(1), 16) for m in re.finditer(r"^([0-9a-f]+) T (\w+)$", nm, re.M)}


def test_a_kernel_growing_does_not_move_the_next(tmp_path):
    target = _target()
    small = _link(str(tmp_path / "small"), "", target)
    grown = _link(str(tmp_path / "grown"), "    for (int i = 0; i < x; i++)\n        x = x * 7 + i;\n" * 6, target)
    for syms in (small, grown):
        assert syms["kern_a"] % 1024 == 0 and syms["kern_b"] % 1024 == 0
    # a.o grew, b.o sits where it did (both under 1 kB)
    assert grown["kern_b"] == small["kern_b"]
