"""Toolchain check run by ./scons before SCons starts.

Works out which targets this invocation needs (the `target=` argument, or
every bundled target for `test`), checks their compilers and emulators, and
installs the Debian packages that provide missing ones when it runs as root
with apt-get; otherwise it prints the exact apt-get line and exits 1.

    python -m tessera.toolchain.bootstrap [scons arguments...]
"""

import os
import shutil
import subprocess
import sys

from .. import config
from ..errors import TesseraError
from ..util.paths import DATA as ROOT


# what the test suite needs beyond the targets' own toolchains: the
# embedding tests build the sample firmware with CMake (Ninja and Make); the report test
# renders report.html in headless Chromium
TEST_PACKAGES = ("cmake", "make", "ninja-build", "chromium")


def needed_targets(argv):
    """Target YAML paths the given scons arguments will build for."""
    words = [a for a in argv if not a.startswith("-")]
    names = []
    for word in words:
        if word.startswith("target="):
            names.append(word.split("=", 1)[1])
    if "test" in words:
        names += config.available("target", ROOT)
    paths = []
    for name in names:
        try:
            paths.append(config.resolve("target", name, ROOT))
        except TesseraError:
            pass  # SCons reports unknown targets with the list of known ones
    return paths


def _installed(package):
    if not shutil.which("dpkg-query"):
        return None   # not Debian: only programs can be checked
    res = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package],
                         capture_output=True, text=True)
    return res.returncode == 0 and "install ok installed" in res.stdout


def _found(program, target):
    if target["runner"]["kind"] == "gvsoc" and program == target["runner"]["program"]:
        from ..runners import gvsoc   # $TESSERA_GVSOC, or PATH

        try:
            return gvsoc.locate(program) is not None
        except TesseraError:
            return False   # the run step says what is wrong with $TESSERA_GVSOC
    return shutil.which(program) is not None


def missing_packages(targets):
    """(packages to install, programs not found, hints) for the loaded targets."""
    packages, programs, hints = [], [], []
    for t in targets:
        for part in ("toolchain", "runner"):
            for pkg in t[part]["debian"]:
                if pkg not in packages and _installed(pkg) is False:
                    packages.append(pkg)
        for prog in (t["toolchain"]["cc"], t["runner"]["program"]):
            if prog and not _found(prog, t) and prog not in programs:
                programs.append(prog)
                if prog == t["runner"]["program"] and t["runner"]["install"]:
                    hints.append(f"{prog}: {t['runner']['install']}")
    return packages, programs, hints


def main(argv):
    targets = []
    for name, path in needed_targets(argv):
        try:
            targets.append(config.load_target(path, name))
        except TesseraError:
            pass  # SCons reports the YAML error itself
    packages, programs, hints = missing_packages(targets)
    if "test" in argv:
        packages += [p for p in TEST_PACKAGES if p not in packages and _installed(p) is False]
    if not packages and not programs:
        return 0
    if not packages:
        if not any(a.startswith("target=") for a in argv):
            # `test` alone: tests that need a program no package provides
            # (GVSoC) skip with their own message
            return 0
        how = "; ".join(hints) if hints else "install it or fix the target's toolchain/runner program"
        print(f"tessera: error: {', '.join(programs)} not found on PATH and no Debian package "
              f"provides it ({how})", file=sys.stderr)
        return 1
    line = "apt-get install -y --no-install-recommends " + " ".join(packages)
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print(f"tessera: installing {' '.join(packages)} (apt-get)", flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        update = subprocess.run(["apt-get", "update", "-qq"], env=env)
        inst = subprocess.run(line.split() + ["-qq"], env=env) if update.returncode == 0 else update
        if inst.returncode != 0:
            print(f"tessera: error: `{line}` failed (exit {inst.returncode})", file=sys.stderr)
            return 1
        return 0
    print(f"tessera: error: missing {' '.join(packages)}; install them with: sudo {line}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
