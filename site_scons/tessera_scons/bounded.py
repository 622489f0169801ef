"""The compiler, archiver and linker under a bound: SCons waits for a
command forever, so a hung toolchain (a compiler stuck on a huge generated
file, a license server, a network file system) would hang the build. Each
command runs in a process group of its own, killed whole at the bound,
with one line naming the tool and what it was making."""

import os
import signal
import subprocess
import sys

from tessera.errors import ToolchainError

# seconds: the biggest bundled network's largest file compiles in well under a minute
TOOL_TIMEOUT = 1800


def limit():
    """The bound in seconds ($TESSERA_TOOL_TIMEOUT overrides it)."""
    return float(os.environ.get("TESSERA_TOOL_TIMEOUT") or TOOL_TIMEOUT)


def spawn(sh, escape, cmd, args, env):
    """SCons's SPAWN (as SCons's POSIX spawn: `sh -c` over the escaped
    arguments) with the bound."""
    proc = subprocess.Popen([sh, "-c", " ".join(args)], env=env, close_fds=True, start_new_session=True)
    try:
        return proc.wait(timeout=limit())
    except subprocess.TimeoutExpired:
        _kill(proc)
        sys.stderr.write(f"tessera: error: {hung(cmd, _output(args))}\n")
        return 124


def run(cmd):
    """subprocess.run(cmd) with its output captured, under the bound;
    ToolchainError (one line) when it hangs."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit())
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise ToolchainError(None, hung(cmd[0], _output(cmd))) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def hung(tool, made):
    return (f"{made or tool}: {os.path.basename(tool)} gave no result within {limit():g} s (hung?) (check the "
            f"toolchain; TESSERA_TOOL_TIMEOUT=<seconds> raises the bound)")


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)   # the tool's own children (cc1, as, ld) too
    except ProcessLookupError:
        pass
    proc.communicate()


def _output(args):
    """What a compile, archive or link command makes: the word after -o,
    else an archiver's archive."""
    words = [a.strip("'\"") for a in args]
    for i, w in enumerate(words[:-1]):
        if w == "-o":
            return words[i + 1]
    return next((w for w in words[1:] if w.endswith(".a")), None)
