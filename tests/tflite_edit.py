"""Edits of a .tflite flatbuffer in place, for the bad-input corpus and the
fuzz test: the `tflite` package only reads, so a field is changed where its
bytes lie (found through the reader's own table positions). Only fields
the converter wrote can be changed (a field left at its default has no
bytes); the edits keep the buffer's length, so every offset stays valid
and only the edited value is wrong.

Slots follow TFLite's schema.fbs (slot = 4 + 2 * field index):
Tensor: shape 4, type 6, buffer 8, name 10, quantization 12;
QuantizationParameters: scale 8, zero_point 10;
Operator: opcode_index 4, inputs 6, outputs 8, builtin_options 12;
Conv2DOptions: padding 4, stride_w 6, stride_h 8, fused_activation_function 10.
"""

import struct

import tflite

TENSOR_SHAPE, TENSOR_TYPE, TENSOR_BUFFER = 4, 6, 8
QUANT_SCALE, QUANT_ZERO_POINT = 8, 10
OP_OPCODE, OP_INPUTS, OP_OUTPUTS = 4, 6, 8
CONV_PADDING, CONV_STRIDE_W, CONV_STRIDE_H, CONV_ACTIVATION = 4, 6, 8, 10


class Flatbuffer:
    def __init__(self, data):
        self.data = bytearray(data)
        self.model = tflite.Model.GetRootAsModel(bytes(self.data), 0)
        self.sg = self.model.Subgraphs(0)

    def bytes(self):
        return bytes(self.data)

    @staticmethod
    def _field(obj, slot):
        o = obj._tab.Offset(slot)
        if not o:
            raise KeyError(f"field at slot {slot} not written (default value)")
        return obj._tab.Pos + o

    @staticmethod
    def _vector(obj, slot):
        """(position of element 0, length) of a vector field."""
        o = obj._tab.Offset(slot)
        if not o:
            raise KeyError(f"vector at slot {slot} not written")
        return obj._tab.Vector(o), obj._tab.VectorLen(o)

    def put(self, pos, fmt, value):
        struct.pack_into("<" + fmt, self.data, pos, value)
        return self

    # ---- tensors ------------------------------------------------------------

    def tensor_type(self, i, value):
        return self.put(self._field(self.sg.Tensors(i), TENSOR_TYPE), "b", value)

    def tensor_buffer(self, i, value):
        return self.put(self._field(self.sg.Tensors(i), TENSOR_BUFFER), "I", value)

    def shape_dim(self, i, k, value):
        pos, _ = self._vector(self.sg.Tensors(i), TENSOR_SHAPE)
        return self.put(pos + 4 * k, "i", value)

    def scale(self, i, value, k=0):
        pos, _ = self._vector(self.sg.Tensors(i).Quantization(), QUANT_SCALE)
        return self.put(pos + 4 * k, "f", value)

    def zero_point(self, i, value, k=0):
        pos, _ = self._vector(self.sg.Tensors(i).Quantization(), QUANT_ZERO_POINT)
        return self.put(pos + 8 * k, "q", value)

    def drop_scales(self, i):
        """The scale vector's length set to 0: no quantization parameters."""
        pos, _ = self._vector(self.sg.Tensors(i).Quantization(), QUANT_SCALE)
        return self.put(pos - 4, "I", 0)

    # ---- operators ----------------------------------------------------------

    def op_opcode(self, i, value):
        return self.put(self._field(self.sg.Operators(i), OP_OPCODE), "I", value)

    def op_input(self, i, k, value):
        pos, _ = self._vector(self.sg.Operators(i), OP_INPUTS)
        return self.put(pos + 4 * k, "i", value)

    def conv_option(self, i, slot, fmt, value):
        table = self.sg.Operators(i).BuiltinOptions()
        opts = tflite.Conv2DOptions()
        opts.Init(table.Bytes, table.Pos)
        return self.put(self._field(opts, slot), fmt, value)

    def opcode_version(self, k, value):
        """Operator code k's operator version (OperatorCode.version, slot 8)."""
        return self.put(self._field(self.model.OperatorCodes(k), 8), "i", value)

    def opcode_builtin(self, k, value):
        """Operator code k's builtin code (both the int32 and the deprecated int8 field)."""
        oc = self.model.OperatorCodes(k)
        for slot, fmt in ((10, "i"), (4, "b")):   # builtin_code, deprecated_builtin_code
            try:
                self.put(self._field(oc, slot), fmt, min(value, 127) if fmt == "b" else value)
            except KeyError:
                pass
        return self
