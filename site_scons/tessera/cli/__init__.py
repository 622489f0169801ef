"""The `tessera` command (installed by pip; `python -m tessera` too):

    tessera build --target T --model M [--out DIR] [var=value ...]
    tessera list
    tessera diff A B [--html FILE]
    tessera --cmake-dir | --scons-tool-dir | --version

Each subcommand is a module of this package with `register(subparsers)`
(its parser, with `run` as the default of `func`) and `run(args)` (the exit
status); main() finds them all, so a new subcommand is one more module. A
TesseraError is one line on stderr and status 2, never a traceback.
"""

import argparse
import importlib
import pkgutil
import sys

from .. import __version__
from ..errors import TesseraError
from ..util import paths


def commands():
    """The subcommand modules, by name."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


class _Print(argparse.Action):
    """--cmake-dir and --scons-tool-dir: print a path and stop."""

    def __init__(self, option_strings, dest, value, **kw):
        super().__init__(option_strings, dest, nargs=0, **kw)
        self.value = value

    def __call__(self, parser, namespace, values, option_string=None):
        print(self.value())
        parser.exit()


def parser():
    ap = argparse.ArgumentParser(
        prog="tessera", description="Quantized neural networks on memory-starved microcontrollers: tile, plan, "
        "generate C, compile, run and check bit for bit against the golden model.",
        epilog="`tessera COMMAND --help` for a command's options; docs/embedding.md for SCons and CMake.")
    ap.add_argument("--version", action="version", version=f"tessera {__version__}")
    ap.add_argument("--cmake-dir", action=_Print, value=paths.cmake_dir,
                    help="print the folder of tessera's CMake package (CMAKE_PREFIX_PATH for find_package(tessera))")
    ap.add_argument("--scons-tool-dir", action=_Print, value=paths.scons_tool_dir,
                    help="print the folder of tessera's SCons tool (env.Tool('tessera', toolpath=[...]))")
    sub = ap.add_subparsers(title="commands", metavar="COMMAND")
    for module in commands():
        module.register(sub)
    return ap


def main(argv=None):
    ap = parser()
    args = ap.parse_args(argv)
    if not hasattr(args, "func"):
        ap.print_help(sys.stderr)
        return 2
    try:
        return args.func(args) or 0
    except TesseraError as err:
        sys.stderr.write(f"tessera: error: {err}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("tessera: error: interrupted (Ctrl-C): nothing it made is taken as done; run it again\n")
        return 130
