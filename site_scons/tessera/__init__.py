"""tessera: deploy quantized neural networks on memory-starved microcontrollers.

Plain Python library (no SCons import). The SCons glue lives in
site_scons/tessera_scons/ (the tool: site_scons/site_tools/tessera.py).
"""

from .util.version import __version__  # noqa: F401
