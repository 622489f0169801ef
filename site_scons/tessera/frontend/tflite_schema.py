"""schema.fbs enums (TensorType, Padding, ActivationFunctionType) as the
TFLite importer and its recurrent layers (tflite_rnn.py) read them."""

INT8, INT32, FLOAT32, UINT8, INT16 = 9, 2, 0, 3, 7
TYPE_NAMES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 7: "int16", 9: "int8"}
SAME, VALID = 0, 1
ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6 = 0, 1, 2, 3
