"""Cortex-M targets: the linker script generated from a target YAML, the
QEMU runner's failure lines, and (marked qemu) whole networks built with
arm-none-eabi-gcc and run under qemu-system-arm, bit-exact, with
deterministic per-layer instruction counts."""

import os
import re
import shutil
import subprocess

import pytest

from helpers import ROOT, one_error, plant_golden_error, report, scons
from test_build_host import tree_files

from tessera import config
from tessera.codegen import linker
from tessera.errors import ConfigError, FitError


def load(name):
    return config.load_target(os.path.join(ROOT, "targets", name + ".yaml"), name)


def variant(name, change):
    """A bundled target with its YAML changed by change(data), parsed."""
    data = config.load_yaml(os.path.join(ROOT, "targets", name + ".yaml"))
    change(data)
    return config.parse_target(data, f"{name}-variant.yaml", name)


# ---- linker script ---------------------------------------------------------

def test_linker_script_follows_the_yaml():
    t = load("stm32h7")
    text = linker.script(linker.view(t, linker.CORTEX_M))
    for name, lvl in t["memory"].items():
        # each region keeps the size the YAML gives, at its address
        assert f"{name} ({'rwx' if lvl['writable'] else 'rx'}) : ORIGIN = 0x{lvl['address']:08x}, " \
               f"LENGTH = {lvl['size']}" in text
    assert ".rodata.tsr.flash : ALIGN(8) { *(.rodata.tsr.flash) } > flash" in text
    assert ".bss.tsr.L1 (NOLOAD) : ALIGN(8) { *(.bss.tsr.L1) } > L1" in text
    assert ".bss.tsr.L2 (NOLOAD) : ALIGN(8) { *(.bss.tsr.L2) } > L2" in text
    assert "} > L2 AT > flash" in text                       # .data copied from flash at start-up
    assert "__tsr_code_reserved = 327680;" in text and "__tsr_stack_reserved = 4096;" in text
    # tessera's sections are claimed before the catch-all .rodata/.bss patterns
    assert text.index(".rodata.tsr.flash :") < text.index("*(.rdata .rodata .rodata.*")
    assert text.index(".bss.tsr.L1 (NOLOAD)") < text.index("*(.bss .bss.*")
    # the vector table comes first in flash
    assert text.index("KEEP(*(.data.init.enter))") < text.index(".rodata.tsr.flash :")
    assert linker.script(linker.view(t, linker.CORTEX_M)) == text


@pytest.mark.parametrize("change, expected", [
    (lambda d: d["memory"]["L2"].pop("address"), "memory.L2.address: missing"),
    (lambda d: d["memory"]["flash"]["reserved"].pop("code"), "no level reserves `code` bytes"),
    (lambda d: d["memory"]["L2"]["reserved"].pop("data"), "no level reserves `data` bytes"),
    (lambda d: d["memory"]["L2"].__setitem__("address", 0x20010000), "overlaps"),
    (lambda d: d["memory"]["flash"]["reserved"].__setitem__("stack", 1024), "both reserve `stack`"),
])
def test_linker_map_errors_name_the_yaml_field(change, expected):
    t = variant("stm32h7", change)
    with pytest.raises(ConfigError) as err:
        linker.view(t, linker.CORTEX_M)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_linker_overflow_becomes_one_line():
    stderr = ("/usr/bin/ld: firmware.elf section `.text' will not fit in region `flash'\n"
              "/usr/bin/ld: region `flash' overflowed by 1234 bytes\ncollect2: error: ld returned 1\n")
    line = linker.link_error(stderr, "targets/stm32f4.yaml")
    assert line == ("targets/stm32f4.yaml: memory.flash: the linked program overflows the level by 1234 "
                    "bytes (raise its size or reservations in the target YAML)")
    stderr = "ld: tessera-linker: L2: the C runtime's data and bss exceed the 4096 bytes of " \
             "memory.L2.reserved.data\n"
    assert "memory.L2.reserved.data" in linker.link_error(stderr, "t.yaml")
    assert linker.link_error("ld: undefined reference to `foo'\n", "t.yaml") is None


def test_program_sizes_read_object_files(tmp_path):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no host gcc")
    src = tmp_path / "o.c"
    src.write_text('const char big[1000] = {1};\nint data[10] = {1};\nint zeros[100];\n'
                   'const char w[64] __attribute__((section(".rodata.tsr.flash"))) = {1};\n'
                   'int f(void) { return data[0] + zeros[1] + big[2] + w[3]; }\n')
    obj = tmp_path / "o.o"
    subprocess.run([gcc, "-c", "-O2", "-fno-common", str(src), "-o", str(obj)], check=True)
    sizes = linker.program_sizes([str(obj)])
    assert sizes["code"] >= 1000 and sizes["data"] >= 40 and sizes["bss"] >= 400
    assert sizes["code"] < 1000 + 64    # tessera's own section is the memory plan's business
    view = linker.view(load("stm32f4"), linker.CORTEX_M)
    linker.check_program(view, sizes, "stm32f4.yaml")
    with pytest.raises(FitError) as err:
        linker.check_program(view, dict(sizes, code=400000), "stm32f4.yaml")
    assert "memory.flash.reserved.code" in str(err.value) and "o.o" in str(err.value)


# ---- the QEMU runner's one-line failures ------------------------------------

def test_qemu_failures_are_named():
    from tessera.runners import qemu

    fault = "TSR layer 0 conv0 fnv=1 count=2 dma=3\nARM fault: hardfault\n\tR0:   0x00000000\n" \
            "\tLR:   0x00001ab5\n\tPC:   0x00000052\n\tXPSR: 0x21000000\n"
    assert qemu.explain(fault, 1) == "the firmware faulted: ARM fault: hardfault at PC: 0x00000052"
    assert qemu.explain("qemu-system-arm: -M nope: unsupported machine type\n", 1) == \
        "QEMU failed: qemu-system-arm: -M nope: unsupported machine type"
    assert qemu.explain("exited\n", 3) is None
    cmd = qemu.command({"program": "qemu-system-arm", "args": ["-M", "mps2-an386"]}, "/x/firmware.elf",
                       ["dump=4", "a,b"])
    assert cmd == ["qemu-system-arm", "-M", "mps2-an386", "-semihosting-config",
                   "enable=on,target=native,arg=firmware.elf,arg=dump=4,arg=a,,b", "-kernel", "/x/firmware.elf"]


# ---- fit check --------------------------------------------------------------

def test_weights_that_do_not_fit_flash_stop_at_once(tmp_path):
    out = tmp_path / "out"
    line = one_error(scons("target=stm32h7", "model=mbv1_128", out=out))
    m = re.search(r"mbv1_128 on stm32h7: flash: ([\d,]+) B of weights do not fit", line)
    assert m, line
    need = int(m.group(1).replace(",", ""))
    assert "at most 1,769,472 B of weights fit stm32h7's flash" in line, line   # 2 MB less 320 kB of code
    # the line is whole, and every target it suggests holds the weights
    assert line.endswith(")") and "[...]" not in line
    named = re.findall(r"(\w+) \((\w+): ([\d,]+) B (\w+)\)", line.split("that holds")[1])
    assert ("gap8", "L3", "8,388,608", "external") in named
    assert named and all(int(b.replace(",", "")) >= need for _, _, b, _ in named)
    assert "stm32f4" not in line and "pulp_open (" not in line
    # stopped before any step: no tiling, nothing a later build could take as done
    assert not os.path.exists(out / "stm32h7" / "mbv1_128" / "tiling")


def test_a_bad_cmsis_nn_checkout_is_one_line(tmp_path):
    line = one_error(scons("target=stm32h7", "model=tiny", f"cmsis_nn={tmp_path}", out=tmp_path / "out"))
    assert f"cmsis_nn={tmp_path}: not a checkout of ARM CMSIS-NN (no Source/ConvolutionFunctions/ in it)" in line


# ---- whole networks under QEMU -----------------------------------------------

def needs_cross():
    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None:
        pytest.skip("needs arm-none-eabi-gcc (with picolibc) and qemu-system-arm")


def counts(run_log):
    from tessera.check import runlog

    with open(run_log) as f:
        return [layer["count"] for layer in runlog.parse(f.read(), run_log)["layers"]]


@pytest.mark.qemu
@pytest.mark.parametrize("target, model", [("stm32h7", "tiny"), ("stm32f4", "tiny"), ("stm32f4", "dscnn_kws")])
def test_network_is_bit_exact_under_qemu_with_instruction_counts(tmp_path, target, model):
    needs_cross()
    out = tmp_path / "out"
    res = scons(f"target={target}", f"model={model}", out=out, check=True)
    assert "PASS" in res.stdout
    rep = report(out, target, model)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    assert rep["counts"]["method"] == "qemu-instructions"
    assert "40 instructions" in rep["counts"]["note"]
    per_layer = [layer["instructions"] for layer in rep["layers"]]
    assert all(n > 0 and n % 40 == 0 for n in per_layer)
    assert rep["totals"]["instructions"] >= sum(per_layer)
    netdir = out / target / model
    # the linker script is a generated file of the build, from the target YAML
    assert (netdir / "link.ld").read_text().count("LENGTH =") == 3
    # determinism: the same firmware run again counts the same instructions
    from tessera import runners

    again = runners.run(load(target)["runner"], str(netdir / "firmware.elf"))
    with open(netdir / "run.log") as f:
        assert again == f.read()
    assert counts(netdir / "run.log") == per_layer


@pytest.mark.qemu
def test_cortexm_tree_is_deterministic(tmp_path):
    """Linker script, objects, ELF, run log and report: byte-identical from
    two output directories, with and without -j."""
    import filecmp

    needs_cross()
    a, b = tmp_path / "a", tmp_path / "b"
    # different hash seeds: any output that follows set or dict-of-hash order differs every time
    scons("target=stm32f4", "model=tiny", out=a, check=True, env={"PYTHONHASHSEED": "1"})
    scons("-j2", "target=stm32f4", "model=tiny", out=b, check=True, env={"PYTHONHASHSEED": "2"})
    fa, fb = tree_files(a / "stm32f4" / "tiny"), tree_files(b / "stm32f4" / "tiny")
    assert sorted(fa) == sorted(fb) and "firmware.elf" in fa and "link.ld" in fa
    assert [n for n in fa if not filecmp.cmp(fa[n], fb[n], shallow=False)] == []


@pytest.mark.qemu
def test_a_mismatch_under_qemu_names_the_element(tmp_path):
    """The check step reruns the firmware with dump=<layer> (argv through
    semihosting) to name the first differing element."""
    needs_cross()
    out = tmp_path / "out"
    scons("target=stm32f4", "model=tiny", out=out, check=True)
    layer = plant_golden_error(out / "stm32f4" / "tiny", 1, (2, 3, 4))
    line = one_error(scons("target=stm32f4", "model=tiny", out=out))
    assert f"layer 1 ({layer['name']}) differs" in line and "[h, w, c] = [2, 3, 4]" in line, line


@pytest.mark.qemu
def test_a_fault_is_one_line(tmp_path):
    from tessera import runners
    from tessera.errors import RunError

    needs_cross()
    t = load("stm32f4")
    (tmp_path / "f.c").write_text("#include <stdint.h>\nint main(void)\n{\n"
                                  "    return (int)*(volatile uint32_t *)0xF0000000u;\n}\n")
    (tmp_path / "link.ld").write_text(linker.script(linker.view(t, linker.CORTEX_M)))
    elf = tmp_path / "f.elf"
    subprocess.run([t["toolchain"]["cc"], *t["toolchain"]["cflags"], "--specs=picolibc.specs",
                    "--oslib=semihost", "--crt0=semihost", "-T", str(tmp_path / "link.ld"),
                    str(tmp_path / "f.c"), "-o", str(elf)], check=True)
    with pytest.raises(RunError) as err:
        runners.run(t["runner"], str(elf))
    message = str(err.value)
    assert "the firmware faulted: ARM fault: hardfault at PC: 0x" in message and "\n" not in message


@pytest.mark.qemu
def test_the_stack_peak_is_measured(tmp_path):
    """The HAL's stack high-water mark (hal_stack_peak, printed by the
    harness; docs/targets.md): a program that touches 2000 bytes of stack
    below main reads a peak of at least that, and not much more; the size is
    the target's reservation."""
    from tessera import runners

    needs_cross()
    t = load("stm32f4")
    (tmp_path / "s.c").write_text("""#include <stdint.h>
#include <stdio.h>
#include "tessera/hal.h"
static __attribute__((noinline)) uint32_t deep(uint32_t n)
{
    volatile uint8_t buf[2000];
    for (uint32_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i + n);
    return buf[n % sizeof buf];
}
int main(void)
{
    hal_init();
    uint32_t before = hal_stack_peak();
    deep(7);
    printf("TSR stack %lu %lu %lu\\n", (unsigned long)before, (unsigned long)hal_stack_peak(),
           (unsigned long)hal_stack_size());
    return 0;
}
""")
    (tmp_path / "link.ld").write_text(linker.script(linker.view(t, linker.CORTEX_M)))
    elf = tmp_path / "s.elf"
    subprocess.run([t["toolchain"]["cc"], *t["toolchain"]["cflags"], "--specs=picolibc.specs", "--oslib=semihost",
                    "--crt0=semihost", f"-I{os.path.join(ROOT, 'kernels', 'include')}", "-T",
                    str(tmp_path / "link.ld"), str(tmp_path / "s.c"),
                    os.path.join(ROOT, "kernels", "hal", "cortexm", "hal.c"), "-o", str(elf)], check=True)
    line = [p for p in runners.run(t["runner"], str(elf)).splitlines() if p.startswith("TSR stack")][0]
    before, peak, size = (int(v) for v in line.split()[2:])
    assert size == t["memory"]["L2"]["reserved"]["stack"]
    assert before < 512 and 2000 < peak < 2000 + 512 and peak < size
