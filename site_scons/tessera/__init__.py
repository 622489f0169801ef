"""tessera: deploy quantized neural networks on memory-starved microcontrollers.

Plain Python library (no SCons import). The SCons glue is the tessera_scons
package; the `tessera` command is tessera.cli; scripts use tessera.api
(docs/python_api.md).

    tessera.scons_tool_dir()    env.Tool('tessera', toolpath=[tessera.scons_tool_dir()])
    tessera.cmake_dir()         CMAKE_PREFIX_PATH for find_package(tessera)
"""

from .util.paths import cmake_dir, scons_tool_dir  # noqa: F401
from .util.version import __version__  # noqa: F401
