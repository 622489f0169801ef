"""tessera: deploy quantized neural networks on memory-starved microcontrollers.

Plain Python library (no SCons import). The SCons glue lives in
site_scons/site_tools/tessera/.
"""

__version__ = "0.1.0"
