#!/usr/bin/python3
"""Writes tests/data/onnx_gap.onnx, a tiny model with op types remat does not read, for
`remat plan --check` (tests/cli.sh): x (2, 8) -> Softsign -> Relu -> Softsign -> Elu -> Gemm.
The check must list Softsign x2 (first: node 0 'softsign0') and Elu x1 (first: node 3 'elu').
usage: /usr/bin/python3 tools/make_onnx_gap.py
"""
import numpy as np
import onnx
from onnx import TensorProto, helper

nodes = [helper.make_node("Softsign", ["x"], ["a"], name="softsign0"),
         helper.make_node("Relu", ["a"], ["b"], name="relu"),
         helper.make_node("Softsign", ["b"], ["c"], name="softsign1"),
         helper.make_node("Elu", ["c"], ["d"], name="elu"),
         helper.make_node("Gemm", ["d", "fc.weight", "fc.bias"], ["y"], name="fc", transB=1)]
w = helper.make_tensor("fc.weight", TensorProto.FLOAT, [3, 8], np.zeros(24, np.float32))
b = helper.make_tensor("fc.bias", TensorProto.FLOAT, [3], np.zeros(3, np.float32))
g = helper.make_graph(nodes, "gap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w, b])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
onnx.checker.check_model(m)
onnx.save(m, "tests/data/onnx_gap.onnx")
