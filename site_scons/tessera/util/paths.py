"""Where tessera's files are, in a checkout and in an installed package.

The bundled targets, models and kernels, the CMake module and the SCons
front door are data of the package: in a checkout they are beside
site_scons/ (targets/, models/, kernels/, cmake/, SConstruct); a wheel
(pyproject.toml) puts them under tessera/data/ and tessera_scons/. Nothing
else in the library assumes either layout.

    DATA            the folder holding targets/, models/, kernels/ and cmake/
    KERNELS         DATA/kernels
    cmake_dir()     the folder with tessera-config.cmake (find_package(tessera))
    scons_tool_dir()    the folder with the SCons tool (env.Tool('tessera', toolpath=[...]))
    sconstruct()    the SConstruct that `tessera build` runs
"""

import os

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # .../tessera
SITE = os.path.dirname(PACKAGE)             # site-packages, or a checkout's site_scons/
_INSTALLED = os.path.join(PACKAGE, "data")

if os.path.isdir(_INSTALLED):
    CHECKOUT = None
    DATA = _INSTALLED
else:
    CHECKOUT = os.path.dirname(SITE)
    DATA = CHECKOUT

KERNELS = os.path.join(DATA, "kernels")


def cmake_dir():
    return os.path.join(DATA, "cmake")


def scons_tool_dir():
    """site_scons/site_tools in a checkout, tessera_scons/site_tools when installed."""
    if CHECKOUT is not None:
        return os.path.join(SITE, "site_tools")
    return os.path.join(SITE, "tessera_scons", "site_tools")


def sconstruct():
    if CHECKOUT is not None:
        return os.path.join(CHECKOUT, "SConstruct")
    # a folder of its own: SCons puts the SConstruct's folder on sys.path
    return os.path.join(SITE, "tessera_scons", "sconstruct", "SConstruct")
