"""The provenance's "how measured" names every rule that stopped a route's rounds: a route slower
than the default beyond the noise margin stops after `minRoundsIfSlower` rounds (2 by default), not
at `minRounds`, which the text alone named before."""

from enginewright.api.models import TuningRunSpec
from enginewright.catalog.writer import how_measured


def spec(timing: dict) -> TuningRunSpec:
    return TuningRunSpec.model_validate(
        {
            "model": {"uri": "s3://models/mlp.onnx"},
            "compiler": {"name": "onnxruntime"},
            "accuracy": {"disabled": True, "reason": "unit test of the provenance's words"},
            "targets": [{"gpuType": "cpu"}],
            "timing": timing,
        }
    )


def test_the_text_names_the_rounds_a_slower_route_stops_after():
    text = how_measured("confirmed", spec({}))
    assert text.startswith("confirmed; ")
    assert "(5-30 rounds," in text and "beyond the noise margin after 2)" in text
    assert "beyond the noise margin after 3)" in how_measured("x", spec({"minRoundsIfSlower": 3}))
    assert "over 2 loads of each" in text and "the confirmation round: 5 loads of each" in text
