"""SCons tool entry point: `env.Tool('tessera')` in tessera's checkout
(site_scons/site_tools is SCons's own tool folder there), and from any other
SConstruct once tessera is installed (pip):

    import tessera
    env.Tool('tessera', toolpath=[tessera.scons_tool_dir()])

The glue is the tessera_scons package, the library the tessera package
(beside this folder in a checkout's site_scons/; in site-packages when
installed, where this file is tessera_scons/site_tools/tessera.py). SCons
registers a tool module in sys.modules under its bare name and puts the
toolpath first on sys.path while loading it; both would make `import
tessera` find this file instead of the library, so this module steps aside
before importing anything.
"""

import os
import sys

_TOOLS = os.path.dirname(os.path.abspath(__file__))
_SITE = os.path.dirname(_TOOLS)
# a checkout's site_scons/ holds the glue and the library; an installed
# package's tessera_scons/ must not go on sys.path (its modules would be top level)
_CHECKOUT = os.path.isfile(os.path.join(_SITE, "tessera_scons", "__init__.py"))

if getattr(sys.modules.get(__name__), "__file__", None) == os.path.abspath(__file__):
    del sys.modules[__name__]
_saved_path = sys.path[:]
sys.path[:] = [_SITE] * _CHECKOUT + [p for p in sys.path if os.path.abspath(p or ".") not in (_TOOLS, _SITE)]
try:
    import tessera  # noqa: E402,F401  (the library)
    from tessera_scons import exists, generate  # noqa: E402,F401
finally:
    sys.path[:] = _saved_path
