"""Reference inputs and references are checked against the model's signature before anything is
built (accuracy.signature.mismatches, the one check of the probe and of `enginewright tune`): each
mismatch names the file and the tensor and says what the model declares."""

import sys

import numpy as np
import pytest

from enginewright.accuracy import compare
from enginewright.accuracy.signature import PairData, Signature, TensorSpec, mismatches, summary
from enginewright.backends.base import onnx_signature


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    sys.path.insert(0, "examples")
    from make_example import write_example

    folder = tmp_path_factory.mktemp("example")
    write_example(folder)
    with np.load(folder / "inputs-0.npz") as i, np.load(folder / "references-0.npz") as r:
        return onnx_signature(folder / "mlp.onnx"), dict(i), dict(r)


def test_the_example_fits_its_model(example):
    signature, inputs, references = example
    assert signature.describe() == (
        "the model takes image float32[8, 3, 32, 32] and gives logits float32[8, 10], features float32[8, 512]"
    )
    assert mismatches(signature, [PairData("in-0", inputs, "ref-0", references)]) == []


def test_a_references_file_missing_an_output_is_refused_unless_outputs_are_named(example):
    signature, inputs, references = example
    pair = PairData("in-0", inputs, "ref-0", {"logits": references["logits"]})
    (found,) = mismatches(signature, [pair])
    assert found.startswith("ref-0: no reference for output 'features'") and "spec.accuracy.outputs" in found
    assert mismatches(signature, [pair], outputs=["logits"]) == []
    (unknown,) = mismatches(signature, [pair], outputs=["logits", "probs"])
    assert "spec.accuracy.outputs names ['probs']" in unknown


def test_inputs_of_the_wrong_dtype_or_shape_name_the_tensor(example):
    signature, inputs, references = example
    found = mismatches(
        signature,
        [
            PairData("in-0", {"image": inputs["image"].astype(np.float64)}, "ref-0", references),
            PairData("in-1", {"image": inputs["image"][:4]}, "ref-1", references),
        ],
    )
    assert found == [
        "in-0: input 'image' is float64; the model declares image float32[8, 3, 32, 32]",
        "in-1: input 'image' has shape [4, 3, 32, 32]; the model declares image float32[8, 3, 32, 32] "
        "(dimension 0 must be 8)",
    ]
    (missing, extra) = mismatches(signature, [PairData("in-0", {"img": inputs["image"]})])
    assert "no input 'image'" in missing and "'img' is not an input of the model" in extra


def test_references_of_the_wrong_shape_or_with_extra_names(example):
    signature, inputs, references = example
    wrong = {**references, "logits": references["logits"][:, :5], "probs": references["logits"]}
    found = mismatches(signature, [PairData("in-0", inputs, "ref-0", wrong)])
    assert found == [
        "ref-0: 'probs' is not an output of the model (its outputs: ['features', 'logits'])",
        "ref-0: reference 'logits' has shape [8, 5]; the model declares logits float32[8, 10] (dimension 1 must be 10)",
    ]
    text = summary(found, signature)
    assert text.endswith("Expected: " + signature.describe())


def test_named_dynamic_sizes_bind_across_a_pair():
    signature = Signature(
        (TensorSpec("x", "float32", ("n", 4)), TensorSpec("y", "int64", ("n",))),
        (TensorSpec("out", "float32", ("n", None)),),
    )
    fits = PairData(
        "in", {"x": np.zeros((3, 4), np.float32), "y": np.zeros(3, np.int64)}, "ref", {"out": np.zeros((3, 7))}
    )
    assert mismatches(signature, [fits]) == []
    bad = PairData(
        "in",
        {"x": np.zeros((3, 4), np.float32), "y": np.zeros(2, np.int64)},
        "ref",
        {"out": np.zeros((5, 7), np.float32)},
    )
    found = mismatches(signature, [bad])
    assert found == [
        "in: input 'y' has shape [2]; the model declares y int64[n], and n is 3 in input 'x'",
        "ref: reference 'out' has shape [5, 7]; the model declares out float32[n, ?], and n is 3 in input 'x'",
    ]


def test_a_backend_that_casts_inputs_takes_any_floating_dtype():
    signature = Signature((TensorSpec("x", "float16", (2,)),), (), casts_inputs=True)
    assert mismatches(signature, [PairData("in", {"x": np.zeros(2, np.float32)})]) == []
    (found,) = mismatches(signature, [PairData("in", {"x": np.zeros(2, np.int32)})])
    assert "input 'x' is int32" in found


def test_only_the_named_outputs_are_compared():
    out = {"a": np.ones(3), "b": np.zeros(3)}
    ref = {"a": np.ones(3), "b": np.ones(3)}
    assert compare([out], [ref], "max", 0.5).failing == ["b"]
    verdict = compare([out], [ref], "max", 0.5, checked=["a"])
    assert verdict.passed and list(verdict.losses) == ["a"]
