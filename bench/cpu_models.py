"""A CPU stand-in for PP-OCRv4's text detector, built with the `onnx` helper API: no downloads.

`db_text_detector` follows the shape of a DB (differentiable binarization) text detector such as
PP-OCRv4 mobile det: a MobileNetV3-style backbone (stem, inverted residual blocks with depthwise
3x3/5x5 convolutions, HardSwish/ReLU, squeeze-excite in the deeper stages, five stride-2 steps),
an FPN neck (1x1 laterals, nearest 2x upsampling + add top-down, 3x3 smoothing, everything
upsampled to 1/4 and concatenated) and a DB head (3x3 conv, two 2x ConvTranspose back to full
resolution, sigmoid): input `x` 1x3xHxW, output `maps` 1x1xHxW. Convolutions carry batch norm
folded into their weights and bias, as an exported inference model does. Weights are drawn from a
seeded numpy generator (He-scaled), so the same arguments give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

OPSET = 17

# (kernel, expansion channels, output channels, squeeze-excite, activation, stride): MobileNetV3
# large's block table, the backbone of PaddleOCR's mobile detectors (scaled by `width` below).
_BLOCKS = [
    (3, 16, 16, False, "relu", 1),
    (3, 64, 24, False, "relu", 2),
    (3, 72, 24, False, "relu", 1),
    (5, 72, 40, True, "relu", 2),
    (5, 120, 40, True, "relu", 1),
    (5, 120, 40, True, "relu", 1),
    (3, 240, 80, False, "hardswish", 2),
    (3, 200, 80, False, "hardswish", 1),
    (3, 184, 80, False, "hardswish", 1),
    (3, 184, 80, False, "hardswish", 1),
    (3, 480, 112, True, "hardswish", 1),
    (3, 672, 112, True, "hardswish", 1),
    (5, 672, 160, True, "hardswish", 2),
    (5, 960, 160, True, "hardswish", 1),
    (5, 960, 160, True, "hardswish", 1),
]
# The block after which each FPN level (strides 4, 8, 16, 32) is taken.
_TAPS = (2, 5, 11, 14)


def _scaled(channels: int, width: float) -> int:
    """Channels times `width`, rounded to a multiple of 8 (at least 8), as MobileNet does."""
    return max(8, int(channels * width + 4) // 8 * 8)


@dataclass
class _Graph:
    rng: np.random.Generator
    nodes: list = field(default_factory=list)
    initializers: list = field(default_factory=list)
    count: int = 0

    def name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def const(self, kind: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.name(kind)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        from onnx import helper

        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(
        self,
        x: str,
        cin: int,
        cout: int,
        kernel: int = 1,
        stride: int = 1,
        groups: int = 1,
        act: str | None = None,
        gain: float = 1.0,
    ) -> str:
        """Conv with batch norm folded in (weight scaled per output channel, bias = shift)."""
        fan_in = cin // groups * kernel * kernel
        weight = self.rng.standard_normal((cout, cin // groups, kernel, kernel), dtype=np.float32)
        weight *= np.float32(gain * np.sqrt(2.0 / fan_in))
        scale = self.rng.uniform(0.8, 1.2, cout).astype(np.float32)  # gamma / sqrt(var + eps)
        bias = self.rng.uniform(-0.1, 0.1, cout).astype(np.float32)  # beta - mean * scale
        pad = kernel // 2
        y = self.node(
            "Conv",
            [x, self.const("w", weight * scale[:, None, None, None]), self.const("b", bias)],
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[pad] * 4,
            group=groups,
        )
        return self.act(y, act)

    def act(self, x: str, act: str | None) -> str:
        if act == "relu":
            return self.node("Relu", [x])
        if act == "hardswish":
            return self.node("HardSwish", [x])
        return x

    def squeeze_excite(self, x: str, channels: int) -> str:
        squeezed = self.node("GlobalAveragePool", [x])
        hidden = self.conv(squeezed, channels, _scaled(channels / 4, 1.0), act="relu")
        gate = self.node("HardSigmoid", [self.conv(hidden, _scaled(channels / 4, 1.0), channels)], alpha=0.2, beta=0.5)
        return self.node("Mul", [x, gate])

    def upsample(self, x: str, factor: int) -> str:
        scales = self.const("scales", np.array([1, 1, factor, factor], dtype=np.float32))
        return self.node("Resize", [x, "", scales], mode="nearest")

    def deconv2x(self, x: str, cin: int, cout: int, act: str | None) -> str:
        weight = self.rng.standard_normal((cin, cout, 2, 2), dtype=np.float32) * np.float32(np.sqrt(2.0 / cin))
        bias = self.rng.uniform(-0.1, 0.1, cout).astype(np.float32)
        y = self.node(
            "ConvTranspose", [x, self.const("w", weight), self.const("b", bias)], kernel_shape=[2, 2], strides=[2, 2]
        )
        return self.act(y, act)


def db_text_detector(size: int = 640, width: float = 1.0, neck: int = 96, seed: int = 0):
    """The detector as an `onnx.ModelProto` for a fixed 1x3x`size`x`size` input (size a multiple of 32)."""
    from onnx import TensorProto, checker, helper

    if size % 32:
        raise ValueError(f"size must be a multiple of 32 (five stride-2 steps), got {size}")
    g = _Graph(np.random.default_rng(seed))
    channels = _scaled(16, width)
    x = g.conv("x", 3, channels, kernel=3, stride=2, act="hardswish")
    taps = []
    for index, (kernel, expand, out, se, act, stride) in enumerate(_BLOCKS):
        expand, out = _scaled(expand, width), _scaled(out, width)
        y = g.conv(x, channels, expand, act=act) if expand != channels else x
        y = g.conv(y, expand, expand, kernel=kernel, stride=stride, groups=expand, act=act)
        if se:
            y = g.squeeze_excite(y, expand)
        y = g.conv(y, expand, out, gain=0.5)
        x = g.node("Add", [x, y]) if stride == 1 and channels == out else y
        channels = out
        if index in _TAPS:
            taps.append((x, channels))
    laterals = [g.conv(t, c, neck) for t, c in taps]  # strides 4, 8, 16, 32
    merged = [laterals[-1]]
    for lateral in reversed(laterals[:-1]):
        merged.insert(0, g.node("Add", [lateral, g.upsample(merged[0], 2)]))
    quarter = neck // 4
    smoothed = [g.conv(m, neck, quarter, kernel=3) for m in merged]
    fused = g.node("Concat", [smoothed[0]] + [g.upsample(s, 2**i) for i, s in enumerate(smoothed) if i], axis=1)
    head = g.conv(fused, neck, quarter, kernel=3, act="relu")
    head = g.deconv2x(head, quarter, quarter, act="relu")
    head = g.deconv2x(head, quarter, 1, act=None)
    g.nodes.append(helper.make_node("Sigmoid", [head], ["maps"], name="sigmoid_out"))
    graph = helper.make_graph(
        g.nodes,
        "db_text_detector",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("maps", TensorProto.FLOAT, [1, 1, size, size])],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="enginewright-bench")
    model.ir_version = 8  # readable by every ONNX Runtime of the last years
    checker.check_model(model)
    return model


def image_like_inputs(size: int, count: int, seed: int = 1) -> list[dict[str, np.ndarray]]:
    """`count` inputs shaped like a normalized photo of a document (smooth background, dark strokes),
    not white noise, so activations look like a real image's."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
        base = 0.8 + 0.1 * np.sin(6 * xx + rng.uniform(0, 6)) * np.cos(4 * yy + rng.uniform(0, 6))
        image = np.repeat(base[None], 3, axis=0)
        for _ in range(max(4, size // 20)):  # "text lines": dark horizontal bars
            y0, x0 = rng.integers(0, size - 8), rng.integers(0, size - 32)
            image[:, y0 : y0 + rng.integers(3, 8), x0 : x0 + rng.integers(16, max(17, size // 2))] *= 0.2
        image += rng.normal(0, 0.02, image.shape).astype(np.float32)
        mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)[:, None, None]
        std = np.array([0.229, 0.224, 0.225], dtype=np.float32)[:, None, None]
        out.append({"x": ((image - mean) / std)[None].astype(np.float32)})
    return out
