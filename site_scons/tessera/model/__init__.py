"""The model stage: the model YAML to graph.json, weights.npz and
golden.npz (prepare), checked against ONNX Runtime, the TFLite interpreter
or a peer toolchain's reference files (reference: DORY, Deeploy)."""
