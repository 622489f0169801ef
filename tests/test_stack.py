"""The link's stack check (tessera.check.stack): each cluster core's
deepest call chain in the linked program against its share of
memory.<tiles>.reserved.stacks. On disassembly text, then on real links of
pulp_open firmware with the cross toolchain (no GVSoC: the check runs at
link time)."""

import json
import os
import shutil

import pytest
import yaml

from helpers import ROOT, scons
from tessera import config
from tessera.check import stack

# objdump -d's shape: a caller, a fork through a function pointer, a
# shrink-wrapped function (two separate frames: the deeper counts), a
# millicode save (its frame is the caller's), a tail call, a switch's `jr`
DISASSEMBLY = """
00001000 <main>:
    1000:	1141                	add	sp,sp,-16
    1002:	2011                	jal	1100 <layer>
    1004:	0141                	add	sp,sp,16
    1006:	8082                	ret

00001100 <layer>:
    1100:	7125                	add	sp,sp,-416
    1102:	00001537          	lui	a0,0x1
    1106:	20050513          	add	a0,a0,512 # 1200 <compute>
    110a:	2011                	jal	1300 <hal_fork>
    110c:	8782                	jr	a5
    110e:	611d                	add	sp,sp,416
    1110:	8082                	ret

00001200 <compute>:
    1200:	a011                	j	1400 <kernel>

00001300 <hal_fork>:
    1300:	1141                	add	sp,sp,-16
    1302:	9782                	jalr	a5
    1304:	0141                	add	sp,sp,16
    1306:	8082                	ret

00001400 <kernel>:
    1400:	1101                	add	sp,sp,-32
    1402:	0001                	nop
    1404:	6105                	add	sp,sp,32
    1406:	7139                	add	sp,sp,-64
    1408:	6121                	add	sp,sp,64
    140a:	2a0002ef          	jal	t0,1500 <__riscv_save_4>
    140e:	8082                	ret

00001500 <__riscv_save_4>:
    1500:	7139                	add	sp,sp,-48
    1502:	8282                	jr	t0

00001600 <entry>:
    1600:	1141                	add	sp,sp,-16
    1602:	2011                	jal	1000 <main>
    1604:	9782                	jalr	a5
    1606:	8082                	ret
"""
SYMBOLS = {0x1000: "main", 0x1100: "layer", 0x1200: "compute", 0x1300: "hal_fork", 0x1400: "kernel",
           0x1500: "__riscv_save_4", 0x1600: "entry"}


def test_the_deepest_chain_through_the_fork_and_only_the_fork():
    funcs = stack.functions(DISASSEMBLY, SYMBOLS)
    # the deeper of kernel's two frames, and the millicode's frame in it
    assert funcs[0x1400]["frame"] == 64 and funcs[0x1400]["saves"] == {0x1500}
    assert funcs[0x1200]["calls"] == {0x1400}           # a tail call
    assert not funcs[0x1100]["indirect"]                # a switch's jr is no call
    assert stack.fork_targets(funcs, "hal_fork") == {0x1200}
    # core 0: entry -> main -> layer -> hal_fork -> compute -> kernel (+ its save)
    need, chain, notes = stack.depth(funcs, "entry", forks=("hal_fork", "entry"))
    assert need == 16 + 16 + 416 + 16 + 0 + 64 + 48
    assert [n for n, _ in chain] == ["entry", "main", "layer", "hal_fork", "compute", "kernel"]
    assert notes == {"recursive": [], "dynamic": []}
    # a worker: entry's fork only, never main's layer
    need, chain, _ = stack.depth(funcs, "entry", forks=("hal_fork", "entry"), skip=("main",))
    assert need == 16 + 0 + 64 + 48 and [n for n, _ in chain] == ["entry", "compute", "kernel"]


def test_a_table_of_function_pointers_is_followed():
    """A function reached only through a table in data (the network's
    layer table) counts under an indirect call outside the fork."""
    text = DISASSEMBLY.replace("    1002:	2011                	jal	1100 <layer>",
                               "    1002:	9782                	jalr	a5")
    funcs = stack.functions(text, SYMBOLS, words={0x1100, 0xdeadbeef})
    assert funcs[0x1100]["taken"] and funcs[0x1000]["indirect"]
    need, chain, _ = stack.depth(funcs, "entry", forks=("hal_fork", "entry"))
    assert [n for n, _ in chain][:3] == ["entry", "main", "layer"] and need == 576
    # without the table the layer is never reached from main
    funcs = stack.functions(text, SYMBOLS)
    assert stack.depth(funcs, "main", forks=("hal_fork",))[0] == 16


def _toolchain_or_skip():
    t = config.load_target(os.path.join(ROOT, "targets", "pulp_open.yaml"), "pulp_open")
    if shutil.which(t["toolchain"]["cc"]) is None:
        pytest.skip(f"{t['toolchain']['cc']} not installed")
    return t


def test_a_pulp_open_link_writes_each_stacks_chain(tmp_path):
    """tiny on pulp_open, linked only (no run): stack.json has core 0's
    chain through main, a layer function, hal_fork and a kernel, the
    workers' without main, each within its share."""
    _toolchain_or_skip()
    out = tmp_path / "out"
    elf = out / "pulp_open" / "tiny" / "firmware.elf"
    scons("-j2", "target=pulp_open", "model=tiny", str(elf), out=out, check=True)
    rep = json.loads((elf.parent / "stack.json").read_text())
    assert rep["field"] == "memory.L1.reserved.stacks" and rep["reserved"] == 8192
    core0, workers = rep["stacks"]
    assert (core0["who"], core0["bytes"], workers["who"], workers["bytes"]) == ("core 0", 2048, "cores 1-7", 864)
    names0, names1 = [n for n, _ in core0["chain"]], [n for n, _ in workers["chain"]]
    assert names0[:2] == ["tsr_cluster_entry", "main"] and "hal_fork" in names0
    assert any(n.startswith("tiny_") for n in names0) and any(n.startswith("pnn_") for n in names0)
    assert "main" not in names1 and any(n.startswith("pnn_") for n in names1)
    assert 0 < workers["need"] <= workers["bytes"] and workers["need"] < core0["need"] <= core0["bytes"]
    assert core0["need"] == sum(b for _, b in core0["chain"])


def test_every_fork_target_the_generators_write_is_named_in_the_platform():
    """The workers' chains start at what hal_fork is handed; the platform
    names those functions by the generators' names for them (FORKED): a
    generator handing a function of another name would leave it out of
    the count. Every `hal_fork(name` in codegen/*.py must match."""
    import fnmatch
    import glob
    import re

    from tessera_scons.platforms import pulp_open

    names = set()
    for path in glob.glob(os.path.join(ROOT, "site_scons", "tessera", "codegen", "*.py")):
        text = open(path).read()
        names |= {m.group(1) + ("0" if m.group(2) else "")
                  for m in re.finditer(r"hal_fork\(([A-Za-z_]\w*)(\{k\})?\s*,", text)}
        if "hal_fork({names[" in text:      # fused.py: its two parts' names, a tuple
            names |= set(re.findall(r'"(\w+_part)"', text))
        if "hal_fork({fork}" in text:       # recurrent.py: _block_loop's fork, passed by name
            names |= set(re.findall(r'_block_loop\(.*, bufs, "(\w+)"', text))
    assert {"compute", "compute0", "dw_part", "pw_part", "step", "project", "k0"} <= names
    for n in sorted(names):
        assert any(fnmatch.fnmatchcase(n, p) for p in pulp_open.FORKED), n


def test_stacks_too_small_for_the_chain_stop_the_link(tmp_path):
    """The same program with 6 kB of stacks: the workers' 656 B cannot
    hold their chain; one line naming the YAML field and the size to give,
    and no ELF left behind."""
    _toolchain_or_skip()
    with open(os.path.join(ROOT, "targets", "pulp_open.yaml")) as f:
        data = yaml.safe_load(f)
    data["memory"]["L1"]["reserved"]["stacks"] = 6144
    path = tmp_path / "small_stacks.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    res = scons("-j2", f"target={path}", "model=tiny", str(out / "small_stacks" / "tiny" / "firmware.elf"), out=out)
    assert res.returncode != 0
    lines = [l for l in (res.stdout + res.stderr).splitlines() if l.startswith("tessera: error:")]
    assert len(lines) == 1, res.stdout[-2000:] + res.stderr[-2000:]
    assert "cores 1-7's stack" in lines[0] and "share of memory.L1.reserved.stacks is 656 B" in lines[0]
    assert "raise memory.L1.reserved.stacks to at least" in lines[0] and "Traceback" not in res.stderr
    assert not (out / "small_stacks" / "tiny" / "firmware.elf").exists()
