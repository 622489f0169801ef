"""The GVSoC runner: a bare-metal firmware on GVSoC's pulp-open chip,

    gvsoc --target=pulp-open --work-dir=<tmp> --binary firmware.elf run

(runner.program and runner.args of the target YAML), under a timeout.

GVSoC gives the simulated program no command line, so arguments (the check
step's `dump=<i>`) are written into a copy of the ELF, in the `tsr_cmdline`
buffer the pulp_open HAL reads at start-up. GVSoC writes its files (a
64 MB flash image among them) into a fresh temporary working directory.
Its launcher is a Python script that starts the simulator as a child
process, so the whole process group is killed on a timeout. A fault (the
HAL's trap handler prints `TSR fault: ...` and exits 3), an invalid memory
access, a non-zero exit status or a hang is a RunError in one line.

Which gvsoc: the user's own, from their environment only: the program
$TESSERA_GVSOC names, else runner.program (`gvsoc`) on PATH. It runs with
the environment it was given (GVSoC's launcher finds its own Python tools,
as its installation set them up).
"""

import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile

from ..errors import RunError
from .process import OUTSIDE, killed_from_outside

CMDLINE_SYMBOL = "tsr_cmdline"
ENV = "TESSERA_GVSOC"
HINT = (f"install GVSoC with its pulp-open target (docs/gvsoc.md) and put its `gvsoc` launcher on PATH, "
        f"or name it with {ENV}=<path>")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def locate(program="gvsoc"):
    """The gvsoc launcher to run: $TESSERA_GVSOC when set (an executable
    file, else a RunError saying so), else `program` on PATH; None when
    neither gives one."""
    named = os.environ.get(ENV)
    if named:
        path = shutil.which(os.path.expanduser(named))
        if path is None:
            raise RunError(f"{ENV}={named}", "not an executable file", HINT)
        return path
    return shutil.which(program or "gvsoc")


def _symbol_file_range(data, name, where):
    """(file offset, size) of a defined symbol of a little-endian ELF32."""
    if data[:4] != b"\x7fELF" or data[4] != 1 or data[5] != 1:
        raise RunError(where, "not a little-endian 32-bit ELF file", "build the firmware for pulp_open")
    shoff, = struct.unpack_from("<I", data, 0x20)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x2E)
    # name, type, flags, addr, offset, size, link, info, addralign, entsize
    sections = [struct.unpack_from("<IIIIIIIIII", data, shoff + i * shentsize) for i in range(shnum)]
    for sh in sections:
        if sh[1] != 2:   # SHT_SYMTAB
            continue
        strtab = sections[sh[6]][4]
        for k in range(sh[5] // 16):
            st_name, st_value, st_size, _, _, st_shndx = struct.unpack_from("<IIIBBH", data, sh[4] + k * 16)
            start = strtab + st_name
            if data[start:data.index(b"\0", start)] != name.encode() or not 0 < st_shndx < len(sections):
                continue
            sec = sections[st_shndx]
            if sec[1] == 8:  # SHT_NOBITS: not in the file
                break
            return sec[4] + st_value - sec[3], st_size
    raise RunError(where, f"no `{CMDLINE_SYMBOL}` buffer in the firmware",
                   "arguments need the pulp_open HAL (kernels/hal/pulp_open)")


def with_args(firmware, args, outdir):
    """A copy of firmware in outdir whose tsr_cmdline holds args (space
    separated); the original is left alone."""
    with open(firmware, "rb") as f:
        data = bytearray(f.read())
    text = " ".join(args).encode() + b"\0"
    offset, size = _symbol_file_range(data, CMDLINE_SYMBOL, firmware)
    if len(text) > size or any(" " in a for a in args):
        raise RunError(firmware, f"arguments {' '.join(args)!r} do not fit the {size}-byte command line",
                       "pass fewer, shorter arguments without spaces")
    data[offset:offset + len(text)] = text
    path = os.path.join(outdir, "args-" + os.path.basename(firmware))
    with open(path, "wb") as f:
        f.write(data)
    return path


def explain(text):
    """One line naming why a GVSoC run failed, from what it printed."""
    lines = [ANSI.sub("", line).strip() for line in text.splitlines()]
    for line in lines:
        if line.startswith("TSR fault:"):
            pc = re.search(r"pc (0x[0-9a-f]+)", line)
            where = f" (riscv64-unknown-elf-addr2line -e firmware.elf {pc.group(1)})" if pc else ""
            return f"the firmware faulted: {line[len('TSR fault:'):].strip()}{where}"
    for line in lines:
        m = re.search(r"\] Invalid access \(pc: (0x[0-9a-f]+), offset: (0x[0-9a-f]+), size: (0x[0-9a-f]+), "
                      r"is_write: (\d)\)", line)
        if m:
            what = "write to" if m.group(4) == "1" else "read from"
            unit = re.search(r"\[\s*(\S+)\s*\]", line)
            return (f"invalid {what} address {m.group(2)} at pc {m.group(1)}"
                    + (f" (GVSoC: {unit.group(1)})" if unit else ""))
    for line in lines:
        m = re.search(r"Platform returned an error \(exitcode: (\d+)\)", line)
        if m:
            last = [l for l in lines if l and "Platform returned an error" not in l]
            return f"the firmware exited with status {m.group(1)}" + (f" (last output: {last[-1]})" if last else "")
    errors = [l for l in lines if re.search(r"\berror\b|Error|Traceback", l)]
    if errors:
        return f"GVSoC failed: {errors[-1]}"
    return None


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# what a shell prints for a child a signal ended
SHELL_WORDS = {signal.SIGKILL: "Killed", signal.SIGTERM: "Terminated", signal.SIGHUP: "Hangup",
               signal.SIGINT: "Interrupt", signal.SIGQUIT: "Quit"}


def _engine_killed(text):
    """The signal that ended GVSoC's engine under its launcher (which then
    says `Platform returned an error (exitcode: 128 + signal)` after the
    shell's word for it), else None."""
    m = re.search(r"Platform returned an error \(exitcode: (\d+)\)", text)
    if m and int(m.group(1)) > 128:
        signum = int(m.group(1)) - 128
        word = SHELL_WORDS.get(signum)
        if word and re.search(rf"^\s*{word}\b", ANSI.sub("", text), re.M):
            return signum
    return None


def run_gvsoc(cmd, where, timeout):
    """stdout + stderr of cmd, run in its own process group; RunError on
    timeout or non-zero exit, naming the cause."""
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as err:
        raise RunError(where, f"cannot start {cmd[0]}: {err.strerror}", HINT) from None
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, _ = proc.communicate()
        err = RunError(where, f"no result within {timeout} s (hung?)",
                       "raise runner.timeout in the target YAML if the network is just slow")
        err.output = out.decode(errors="replace")
        raise err from None
    except BaseException:
        _kill(proc)   # never leave a simulator behind (e.g. on Ctrl-C)
        raise
    text = out.decode(errors="replace")
    signum = -proc.returncode if proc.returncode < 0 else _engine_killed(text)
    if signum in OUTSIDE:
        err = killed_from_outside(where, -signum)
        err.output = text
        raise err
    if proc.returncode != 0:
        reason = explain(text)
        if reason is None:
            tail = " | ".join(ANSI.sub("", text).strip().splitlines()[-2:])
            reason = f"exit status {proc.returncode} ({tail or 'no output'})"
        err = RunError(where, reason)
        err.output = text
        raise err
    return text


def flash_image(firmware):
    """The HyperFlash image that goes with a firmware: <name>.hyperflash.bin
    beside the ELF (data the program reads from L3 through the uDMA)."""
    return os.path.splitext(firmware)[0] + ".hyperflash.bin"


def flash_args(firmware, args, work, cwd=None):
    """Preload the board's HyperFlash (hyper0, chip select 1) with the
    firmware's flash image, if it has one: the storage level's image the
    runners pass as `storage=<path>`, else <firmware>.hyperflash.bin. GVSoC's
    flash model reads `hyperflash.bin` in its working directory; gapy would
    write an empty one there, which --flash-no-auto stops."""
    cards = [a[len("storage="):] for a in args if a.startswith("storage=")]
    image = os.path.join(cwd or "", cards[-1]) if cards else flash_image(firmware)
    if not os.path.exists(image):
        return []
    shutil.copyfile(image, os.path.join(work, "hyperflash.bin"))
    return ["--flash-no-auto"]


def run(runner, firmware, args, timeout, cwd=None):
    """cwd: the folder a relative storage=<name> is in (the firmware opens nothing there)."""
    where = f"run of {firmware} on GVSoC"
    program = locate(runner["program"])
    if program is None:
        raise RunError(where, f"`{runner['program'] or 'gvsoc'}` is not on PATH and {ENV} is not set", HINT)
    firmware = os.path.abspath(firmware)
    with tempfile.TemporaryDirectory(prefix="tessera-gvsoc-") as work:
        elf = with_args(firmware, args, work) if args else firmware
        cmd = [program, *runner["args"], f"--work-dir={work}", *flash_args(firmware, args, work, cwd),
               "--binary", elf, "run"]
        return run_gvsoc(cmd, where, timeout)
