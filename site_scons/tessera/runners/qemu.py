"""The QEMU runner: a bare-metal firmware under qemu-system-<arch> with
semihosting (console, argv and exit status), e.g.

    qemu-system-arm -M mps2-an500 -nographic -icount shift=0 \\
        -semihosting-config enable=on,target=native,arg=firmware.elf,arg=dump=3 \\
        -kernel firmware.elf

The machine and its options come from the target YAML (runner.program,
runner.args). Arguments reach main() through semihosting's command line:
the first `arg=` is the program name, as on a host (picolibc's semihost
crt0 puts a placeholder in argv[0] and the whole command line after it, so
the harness scans every argv entry). Output arrives on QEMU's stderr; it is
merged with stdout. A fault (picolibc's crt0 prints its report and exits
non-zero), a QEMU error, a hang (the timeout) or a non-zero exit is a
RunError with the reason in one line.
"""

import os
import re

from .process import run_command


def command(runner, firmware, args):
    """The QEMU command line for firmware with argv args."""
    # QEMU's option syntax doubles a comma inside a value
    argv = [os.path.basename(firmware), *args]
    semihosting = "enable=on,target=native" + "".join(",arg=" + a.replace(",", ",,") for a in argv)
    return [runner["program"], *runner["args"], "-semihosting-config", semihosting, "-kernel", firmware]


def explain(text, returncode):
    """One line naming why a QEMU run failed, from what it printed."""
    lines = [line.strip() for line in text.splitlines()]
    for i, line in enumerate(lines):
        # picolibc's crt0 fault handler: "ARM fault: hardfault" then registers
        if re.search(r"\bfault\b", line, re.IGNORECASE):
            pc = next((l for l in lines[i + 1:i + 12] if re.match(r"(PC|pc|mepc)\s*[:=]", l)), "")
            return f"the firmware faulted: {line}" + (f" at {' '.join(pc.split())}" if pc else "")
    for line in lines:
        if line.startswith(("qemu-system-", "qemu:")):
            return f"QEMU failed: {line}"
    return None


def run(runner, firmware, args, timeout, cwd=None):
    """cwd: the folder QEMU runs in (semihosting opens relative paths there)."""
    return run_command(command(runner, firmware, args), f"run of {firmware} under {runner['program']}",
                       timeout, explain=explain, cwd=cwd)
