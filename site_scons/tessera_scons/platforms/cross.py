"""What every bare-metal cross platform shares: the linker script as a build
step (its input is the projection tessera.codegen.linker.view), and a link
that checks the program against the target's reservations before linking
and turns a linker overflow into one line naming the YAML field to change.

    elf = firmware(env, target, arch, objects, libs, outdir)   # outdir/link.ld, firmware.elf
"""

import fnmatch
import os
import subprocess
import sys

from SCons.Script import Action

from tessera.util import canon
from tessera.codegen import linker
from tessera.errors import TesseraError, ToolchainError

from .. import bounded


def require_tool(env, program, target, what):
    """Stop with one line when a toolchain program is missing."""
    if env.WhereIs(program) is None:
        from .. import fail

        debian = " ".join(target["toolchain"]["debian"])
        fail(ToolchainError(target["path"], f"toolchain.{what}: {program} not found on PATH",
                            f"install it (Debian: apt-get install {debian})" if debian else "install it"))


def check_flags(env, target):
    """Stop with one line when the compiler refuses the target's flags (a
    typo in toolchain.cflags would otherwise surface as gcc's own output
    on the first object): one compile of an empty file, at read time."""
    cc = env.WhereIs(env["CC"]) or env["CC"]
    cmd = [cc, *env.subst_list("$CFLAGS")[0], "-x", "c", "-c", "-", "-o", os.devnull]
    try:
        res = subprocess.run([str(a) for a in cmd], input="int tsr_flag_check;\n", capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        from .. import fail
        fail(ToolchainError(target["path"], f"toolchain.cc: {env['CC']} does not run ({err})",
                            "check toolchain.cc"))
    if res.returncode != 0:
        from .. import fail
        lines = [l for l in (res.stderr or res.stdout).splitlines() if "error" in l] or (res.stderr or "").splitlines()
        first = (lines or ["failed"])[0]
        fail(ToolchainError(target["path"], f"toolchain.cflags: {env['CC']} refuses the flags: {first[:200]}",
                            "fix or remove the flag in toolchain.cflags"))


def firmware(env, target, arch, objects, libs, outdir, stacks=None):
    """Declare outdir/link.ld (from the target's memory map) and
    outdir/firmware.elf linked with it, and its link map firmware.map
    (what the report counts code by); with `stacks` (the platform's spec,
    tessera.check.stack.check) the link also checks each stack's deepest
    call chain against its share and writes them to outdir/stack.json.
    Returns the ELF node."""
    members = {}
    for pat in arch.get("code_layout", {}).get("each") and arch["code_layout"]["first"] or ():
        for lib in libs:
            if pat.endswith(":") and fnmatch.fnmatch(os.path.basename(str(lib)) + ":", pat):
                members[pat] = [os.path.basename(str(o)) for o in lib.sources]
    try:
        view = linker.view(target, arch, members)
    except TesseraError as err:
        from .. import fail

        fail(err)
    text = canon.dumps(view)
    script = env.Command(os.path.join(outdir, "link.ld"), env.Value(text),
                         Action(gen_script, "tessera: generate $TARGET"))
    env.Depends(script, canon.source_files("codegen"))
    outs = [os.path.join(outdir, "firmware.elf"), os.path.join(outdir, "firmware.map")]
    if stacks:
        outs.append(os.path.join(outdir, "stack.json"))
    elf = env.Command(outs, list(objects) + list(libs) + [script[0]],
                      Action(link_elf, "tessera: link $TARGET",
                             varlist=["LINK", "LINKFLAGS", "TESSERA_STACKS"]),
                      TESSERA_LINK_VIEW=text, TESSERA_TARGET_PATH=target["path"],
                      TESSERA_STACKS=canon.dumps(stacks) if stacks else "")
    env.Depends(elf, canon.source_files("codegen"))
    if stacks:
        env.Depends(elf, canon.source_files("check.stack"))
    return elf[:1]


# ---- actions (see steps.py for why each is a two-line function) -------------

def gen_script(target, source, env):
    from .. import steps

    return steps.guarded(_gen_script, target, source, env)


def _gen_script(target, source, env):
    import json

    canon.write_atomic(str(target[0]), linker.script(json.loads(source[0].read())))


def link_elf(target, source, env):
    from .. import steps

    return steps.guarded(_link_elf, target, source, env)


def _link_elf(target, source, env):
    import json

    view = json.loads(env["TESSERA_LINK_VIEW"])
    where = env["TESSERA_TARGET_PATH"]
    script = str(source[-1])
    inputs = [str(s) for s in source[:-1]]
    objects = [p for p in inputs if p.endswith(".o")]
    linker.check_program(view, linker.program_sizes(objects), where)
    cmd = [env.subst("$LINK"), *env.subst("$LINKFLAGS").split(), "-T", script,
           "-o", str(target[0]), f"-Wl,-Map={target[1]}", *inputs]
    res = bounded.run(cmd)
    if res.returncode != 0:
        _remove(target)
        reason = linker.link_error(res.stderr, where)
        if reason:
            raise ToolchainError(None, reason)
        sys.stderr.write(res.stderr)
        raise ToolchainError(where, f"linking {os.path.basename(str(target[0]))} failed "
                             f"({' | '.join(res.stderr.strip().splitlines()[-2:])})")
    if res.stderr.strip():
        sys.stderr.write(res.stderr)
    linker.relative_map(str(target[1]))
    if env.get("TESSERA_STACKS"):
        try:
            _check_stacks(env, target, json.loads(env["TESSERA_STACKS"]), where)
        except TesseraError:
            _remove(target)
            raise


def _remove(target):
    """A failed link leaves none of its outputs (no stale success)."""
    for t in target:
        if os.path.exists(str(t)):
            os.unlink(str(t))


def _check_stacks(env, target, spec, where):
    """stack.json: each stack's deepest call chain in the linked program
    (its disassembly, symbols and map) against its share; the first that
    does not fit stops the build."""
    from tessera.check import stack

    res = bounded.run([env.WhereIs(spec["objdump"]) or spec["objdump"], "-d", str(target[0])])
    if res.returncode != 0:
        raise ToolchainError(where, f"{spec['objdump']} -d {os.path.basename(str(target[0]))} failed "
                             f"({' | '.join(res.stderr.strip().splitlines()[-2:])})")
    with open(str(target[1])) as f:
        funcs = stack.program(str(target[0]), f.read(), res.stdout)
    rows = stack.check(funcs, spec)
    canon.write_atomic(str(target[2]), canon.dumps({"field": spec["field"], "reserved": spec["reserved"],
                                                     "stacks": rows}))
    for row in rows:
        if row["need"] > row["bytes"]:
            raise ToolchainError(where, *stack.overflow_line(row, spec))
