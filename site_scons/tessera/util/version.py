"""tessera's version (the root package and generated ONNX files say it)."""

__version__ = "0.1.0"
