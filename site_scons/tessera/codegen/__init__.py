"""Code generation: C for each step (layer, fused, whole), its constants
(weights), the network's entry point and harness (network), the
out-of-core program (program), the storage image (image) and the linker
script (linker), through one adapter per kernel library (libraries)."""
