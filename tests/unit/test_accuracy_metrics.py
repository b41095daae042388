"""Loss metrics: definitions, properties, non-finite values, and errors that name the tensor."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from enginewright.accuracy import AccuracyError, compare, loss

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=32)
tensors = arrays(np.float32, st.integers(1, 64), elements=finite)


def test_metric_definitions_on_a_known_pair():
    out = np.array([1.0, 2.0, 3.0, 4.0])
    ref = np.array([1.0, 2.5, 2.0, 4.0])
    assert loss(out, ref, "abs") == pytest.approx(0.375)
    assert loss(out, ref, "squared") == pytest.approx((0.25 + 1.0) / 4)
    assert loss(out, ref, "max") == pytest.approx(1.0)
    assert loss(out, ref, "l0", atol=0.6, rtol=0.0) == pytest.approx(0.25)
    cos = np.dot(out, ref) / (np.linalg.norm(out) * np.linalg.norm(ref))
    assert loss(out, ref, "cosine") == pytest.approx(1 - cos)


@given(tensors)
def test_a_tensor_has_zero_loss_against_itself(t):
    for metric in ("abs", "squared", "max", "l0"):
        assert loss(t, t, metric) == 0.0
    assert loss(t, t, "cosine") == pytest.approx(0.0, abs=1e-9)


@given(tensors, st.floats(0.01, 100))
def test_cosine_is_scale_invariant(t, scale):
    if np.linalg.norm(t) == 0:
        return
    assert loss(t * np.float32(scale), t, "cosine") == pytest.approx(0.0, abs=1e-6)


@settings(max_examples=200)
@given(tensors, st.data())
def test_max_bounds_abs_and_squared_is_bounded_by_max_squared(a, data):
    b = data.draw(arrays(np.float32, a.shape, elements=finite))
    assert loss(a, b, "max") >= loss(a, b, "abs") - 1e-9
    assert loss(a, b, "squared") <= loss(a, b, "max") ** 2 * (1 + 1e-9) + 1e-12
    assert 0.0 <= loss(a, b, "cosine") <= 2.0


@pytest.mark.parametrize("size", [1, 7, 64, 1000])
def test_cosine_of_opposite_tensors_stays_within_two_despite_rounding(size):
    ones = np.ones(size, dtype=np.float32)
    for out, ref in ((ones, -ones), (ones * np.float32(0.1), -ones * np.float32(0.3))):
        value = loss(out, ref, "cosine")
        assert value <= 2.0 and value == pytest.approx(2.0)  # size 1000 gave 2.0000000000000004


def test_non_finite_values():
    ref = np.array([1.0, np.nan, np.inf, 2.0])
    assert loss(ref.copy(), ref, "abs") == 0.0  # same NaN / same inf count as equal
    worse = ref.copy()
    worse[0] = np.nan
    assert math.isinf(loss(worse, ref, "max"))
    assert math.isinf(loss(np.array([np.inf]), np.array([-np.inf]), "cosine"))


def test_shape_and_dtype_mismatch_name_the_tensor():
    with pytest.raises(AccuracyError, match="tensor 'logits'.*shape"):
        loss(np.zeros((2, 3)), np.zeros((3, 2)), "abs", name="logits")
    with pytest.raises(AccuracyError, match="tensor 'ids'.*dtype"):
        loss(np.array(["a"]), np.array(["b"]), "abs", name="ids")
    with pytest.raises(AccuracyError, match="unknown metric"):
        loss(np.zeros(1), np.zeros(1), "rmse")


def test_route_passes_only_if_every_output_of_every_pair_passes():
    ref = [{"a": np.ones(4), "b": np.ones(4)}, {"a": np.ones(4), "b": np.ones(4)}]
    good = [{"a": np.ones(4), "b": np.ones(4) * 1.001}, {"a": np.ones(4), "b": np.ones(4)}]
    assert compare(good, ref, "max", 0.01).passed
    bad = [{"a": np.ones(4), "b": np.ones(4)}, {"a": np.ones(4), "b": np.ones(4) * 1.5}]
    verdict = compare(bad, ref, "max", 0.01)
    assert not verdict.passed and verdict.failing == ["b"]
    assert verdict.losses["b"] == pytest.approx(0.5)  # worst pair
    assert "b=0.5" in verdict.summary()
    # loss == threshold fails, as in trtexec
    assert not compare([{"a": np.array([1.0])}], [{"a": np.array([1.5])}], "max", 0.5).passed
    with pytest.raises(AccuracyError, match="no output 'b'"):
        compare([{"a": np.ones(4)}], [{"a": np.ones(4), "b": np.ones(4)}], "max", 0.1)
