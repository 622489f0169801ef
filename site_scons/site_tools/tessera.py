"""SCons tool entry point: `env.Tool('tessera')` (or with
toolpath=['<tessera>/site_scons/site_tools'] from another repository).

The glue lives in site_scons/tessera_scons/, the library in
site_scons/tessera/. SCons registers a tool module in sys.modules under its
bare name and puts the toolpath first on sys.path while loading it; both
would make `import tessera` find this file instead of the library, so this
module steps aside before importing anything.
"""

import os
import sys

_TOOLS = os.path.dirname(os.path.abspath(__file__))
_SITE = os.path.dirname(_TOOLS)

if getattr(sys.modules.get(__name__), "__file__", None) == os.path.abspath(__file__):
    del sys.modules[__name__]
_saved_path = sys.path[:]
sys.path[:] = [_SITE] + [p for p in sys.path if os.path.abspath(p or ".") not in (_TOOLS, _SITE)]
try:
    import tessera  # noqa: E402,F401  (the library)
    from tessera_scons import exists, generate  # noqa: E402,F401
finally:
    sys.path[:] = _saved_path
