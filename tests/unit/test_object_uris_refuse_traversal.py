"""spec.model.uri and the reference pairs' URIs: an object key with '..', '.' or empty segments or
control characters is refused by the models, and the CRD's pattern refuses exactly the same URIs."""

import re

import pytest
from hypothesis import given, strategies as st
from pydantic import ValidationError

from enginewright.api.crd import tuningrun_crd
from enginewright.api.models import S3_URI_PATTERN, ModelRef, ReferencePair, check_s3_uri

BAD = [
    "s3://bucket/../../etc/passwd",
    "s3://bucket/models/..",
    "s3://bucket/./model.onnx",
    "s3://bucket/a//b",
    "s3://bucket/a/",
    "s3://bucket/",
    "s3://bucket/a\nb",
    "s3://bucket/a\x00b",
    "s3://bucket/\x7fx",
    "s3://Bucket/a",
    "http://bucket/a",
    "s3://bucket",
]
GOOD = [
    "s3://bucket/model.onnx",
    "s3://my-bucket.v2/models/resnet50/model.onnx",
    "s3://bucket/.hidden/a..b/...",
    "s3://bucket/..x",
    "s3://bucket/x..",
    "s3://bucket/a b/été.npz",
]


@pytest.mark.parametrize("uri", BAD)
def test_models_refuse_climbing_empty_and_control_segments(uri):
    with pytest.raises(ValidationError, match="uri"):
        ModelRef(uri=uri)
    with pytest.raises(ValidationError, match="inputs"):
        ReferencePair(inputs=uri, references="s3://bucket/ref.npz")
    with pytest.raises(ValidationError, match="references"):
        ReferencePair(inputs="s3://bucket/in.npz", references=uri)
    assert not re.fullmatch(S3_URI_PATTERN, uri)


@pytest.mark.parametrize("uri", GOOD)
def test_plain_keys_are_accepted(uri):
    assert ModelRef(uri=uri).uri == uri
    assert re.fullmatch(S3_URI_PATTERN, uri)


def test_the_error_says_what_is_wrong():
    with pytest.raises(ValidationError, match=r"must not have empty, '\.' or '\.\.' segments"):
        ModelRef(uri="s3://bucket/../../etc/passwd")


@given(st.text(alphabet=st.sampled_from(list("ab./\n\x00%-")), max_size=12))
def test_the_crd_pattern_and_the_model_agree(key):
    uri = f"s3://bucket/{key}"
    try:
        check_s3_uri(uri)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == bool(re.fullmatch(S3_URI_PATTERN, uri))


def test_the_crd_carries_the_pattern_and_a_cel_rule_on_every_uri():
    spec = tuningrun_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    pair = spec["accuracy"]["properties"]["pairs"]["items"]["properties"]
    for field in (spec["model"]["properties"]["uri"], pair["inputs"], pair["references"]):
        assert field["pattern"] == S3_URI_PATTERN and field["maxLength"] == 1093
        assert "'..'" in field["x-kubernetes-validations"][0]["message"]
