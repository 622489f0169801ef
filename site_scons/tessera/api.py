"""tessera for scripts and notebooks (docs/python_api.md):

    from tessera import api
    target = api.load_target("stm32h7")             # a bundled name or a YAML path: the checked YAML
    model = api.load_model("models/kws.yaml")
    build = api.build("stm32h7", "tiny", out="build/tessera", fusion="none")
    build.passed, build.outdir, build.report["totals"]
    report = api.read_report("build/tessera/stm32h7/tiny")   # a report.json or a build folder

build() runs the same SCons build as `./scons` and `tessera build` (tiling,
plan, code generation, compilation, the run and the bit-exact check), in a
child process, and returns when it is done.
"""

import dataclasses
import os
import subprocess
import sys

from . import config
from .errors import ConfigError, TesseraError
from .pipeline import model as configuration
from .util import canon, paths

# given as arguments of build(), never as variables
OWN = ("target", "model", "out")


def resolve(kind, value):
    """(name, YAML path) of a target or model: a bundled name or a path
    (relative to the working directory)."""
    return config.resolve(kind, os.fspath(value), paths.DATA)


def load_target(target):
    """The target YAML, validated, with its defaults (a dict)."""
    name, path = resolve("target", target)
    return config.load_target(path, name)


def load_model(model):
    """The model YAML, validated, with its defaults (a dict)."""
    name, path = resolve("model", model)
    return config.load_model(path, name)


def load(target, model, fusion=None, fusion_cost=None):
    """(target, model) as a build configures them: fusion and its cost
    source from the arguments, else the YAML files' defaults."""
    tname, tpath = resolve("target", target)
    mname, mpath = resolve("model", model)
    return configuration.load(tname, tpath, mname, mpath, fusion, fusion_cost)


def read_report(where):
    """report.json of a build (its path, or the build's folder
    <out>/<target>/<model>) as a dict."""
    where = os.fspath(where)
    path = os.path.join(where, "report.json") if os.path.isdir(where) else where
    try:
        return canon.read_json(path)
    except (OSError, ValueError) as err:
        raise TesseraError(path, f"cannot read a report.json ({err.__class__.__name__})",
                           "build the network first, or give a report.json or a build folder") from None


def _arg_path(value):
    """A YAML path made absolute (SCons reads it from another folder); a
    bundled name as it is."""
    value = os.fspath(value)
    if value.endswith((".yaml", ".yml")) or os.sep in value:
        return os.path.abspath(value)
    return value


def scons_command(target, model, out="generated", run=True, export=False, jobs=None, variables=None):
    """The command line of a build: tessera's SConstruct under this
    interpreter's SCons. `run=False` builds only the network's files for
    another build (the `export` alias: no compilation, no run); `export`
    also exports after a run; `variables` the build's other variables
    (fusion, overlap, ram_cap, verbose, ...: `tessera build --help`)."""
    variables = dict(variables or {})
    clash = sorted(set(variables) & set(OWN))
    if clash:
        raise ConfigError(f"{clash[0]}=", "is an argument of its own", f"give it as --{clash[0]} (or {clash[0]}=...)")
    cmd = [sys.executable, "-m", "SCons", "-f", paths.sconstruct(), "--no-site-dir",
           f"target={_arg_path(target)}", f"model={_arg_path(model)}", f"out={os.path.abspath(os.fspath(out))}"]
    if jobs:
        cmd.append(f"-j{int(jobs)}")
    cmd += [f"{k}={v}" for k, v in variables.items()]
    if not run:
        cmd.append("export")
    elif export:
        cmd.append("export=cmake")
    return cmd


@dataclasses.dataclass
class Build:
    """A finished build: its folder <out>/<target>/<model>, SCons's exit
    status, and (quiet=True) what it printed."""
    outdir: str
    returncode: int
    output: str = None

    @property
    def passed(self):
        """The build finished and every layer matched the golden model."""
        return self.returncode == 0 and os.path.exists(os.path.join(self.outdir, ".passed"))

    @property
    def report(self):
        return read_report(self.outdir)


def build(target, model, out="generated", run=True, export=False, jobs=None, quiet=False, **variables):
    """Build (target, model) into <out>/<target>/<model>/ as `tessera build`
    does and return a Build. A bad target or model name, or a bad
    variable, fails here (TesseraError) or in the build (returncode 2 and
    its one-line message)."""
    tname, _ = resolve("target", target)
    mname, _ = resolve("model", model)
    cmd = scons_command(target, model, out, run, export, jobs, {k: str(v) for k, v in variables.items()})
    res = subprocess.run(cmd, capture_output=quiet, text=True)
    output = (res.stdout + res.stderr) if quiet else None
    return Build(os.path.join(os.path.abspath(os.fspath(out)), tname, mname), res.returncode, output)
