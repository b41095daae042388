"""Writes the example model and its reference data (deterministic; no downloads).

    python examples/make_example.py [OUT_DIR]

OUT_DIR (default examples/data) gets:
  mlp.onnx                  a small conv + MLP classifier, float32, random weights (seed 0)
  inputs-0.npz, inputs-1.npz          two reference pairs of inputs ("image")
  references-0.npz, references-1.npz  outputs ("logits", "features") computed by ONNX Runtime with
                                      every graph optimization off: the unoptimized reference
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BATCH = 8


def build_model(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)

    def weight(name, *shape, scale=0.1):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        weight("conv1_w", 32, 3, 3, 3), weight("conv1_b", 32),
        weight("conv2_w", 64, 32, 3, 3, scale=0.05), weight("conv2_b", 64),
        weight("fc1_w", 64 * 8 * 8, 512, scale=0.02), weight("fc1_b", 512),
        weight("fc2_w", 512, 512, scale=0.04), weight("fc2_b", 512),
        weight("fc3_w", 512, 10, scale=0.05), weight("fc3_b", 10),
        numpy_helper.from_array(np.array([-1, 64 * 8 * 8], dtype=np.int64), "flat_shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv1_w", "conv1_b"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2_w", "conv2_b"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p2", "flat_shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "fc1_w"], ["m1"]),
        helper.make_node("Add", ["m1", "fc1_b"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["h1"]),
        helper.make_node("MatMul", ["h1", "fc2_w"], ["m2"]),
        helper.make_node("Add", ["m2", "fc2_b"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["features"]),
        helper.make_node("MatMul", ["features", "fc3_w"], ["m3"]),
        helper.make_node("Add", ["m3", "fc3_b"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes, "example-mlp",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [BATCH, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, 10]),
         helper.make_tensor_value_info("features", TensorProto.FLOAT, [BATCH, 512])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="enginewright")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def reference_outputs(model_path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


def write_example(out: Path, pairs: int = 2) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    model_path = out / "mlp.onnx"
    onnx.save(build_model(), str(model_path))
    rng = np.random.default_rng(1)
    for i in range(pairs):
        inputs = {"image": rng.standard_normal((BATCH, 3, 32, 32)).astype(np.float32)}
        np.savez(out / f"inputs-{i}.npz", **inputs)
        np.savez(out / f"references-{i}.npz", **reference_outputs(model_path, inputs))
    return model_path


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "data"
    print(f"wrote {write_example(target)}")
