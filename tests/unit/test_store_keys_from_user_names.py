"""Object-store keys built from user-chosen names stay inside their prefix, one segment per name."""

import pytest
from hypothesis import given, strategies as st

from enginewright.store import LocalStore
from enginewright.store.keys import MAX_SEGMENT_BYTES, check_key, object_key, safe_segment, unescape_segment


@pytest.mark.parametrize("name", ["default", "resnet50-tune", "NVIDIA-H200", "e3b0c44298fc", "stage1-b000", "a.b_c"])
def test_safe_names_are_unchanged(name):
    assert safe_segment(name) == name


@pytest.mark.parametrize(
    "name,escaped",
    [
        ("..", "%2E%2E"),
        (".", "%2E"),
        ("a/b", "a%2Fb"),
        ("../../etc", "..%2F..%2Fetc"),
        ("x\ny", "x%0Ay"),
        ("50%", "50%25"),
        ("h200 sxm", "h200%20sxm"),
        ("été", "%C3%A9t%C3%A9"),
    ],
)
def test_unsafe_names_are_escaped_into_one_segment(name, escaped):
    assert safe_segment(name) == escaped
    assert unescape_segment(escaped) == name


def test_empty_name_is_refused():
    with pytest.raises(ValueError, match="cannot be empty"):
        safe_segment("")


@given(st.text(min_size=1, max_size=300))
def test_any_name_is_one_segment_that_cannot_climb_and_distinct_names_stay_distinct(name):
    seg = safe_segment(name)
    assert "/" not in seg and seg not in (".", "..") and seg.isascii() and seg.isprintable()
    assert len(seg.encode()) <= MAX_SEGMENT_BYTES
    if "~" not in seg:
        assert unescape_segment(seg) == name  # reversible, hence no two names share a segment


def test_long_names_are_shortened_with_a_digest_and_stay_distinct():
    a, b = "x" * 300 + "a", "x" * 300 + "b"
    assert safe_segment(a) != safe_segment(b) and len(safe_segment(a)) <= MAX_SEGMENT_BYTES
    assert safe_segment("/" * 200) != safe_segment("/" * 201)


def test_object_key_keeps_a_hostile_name_inside_the_store(tmp_path):
    store = LocalStore(tmp_path / "store")
    key = object_key("runs", "..", "../../etc", "passwd")
    store.put(key, b"x")
    assert key == "runs/%2E%2E/..%2F..%2Fetc/passwd"
    assert (tmp_path / "store" / "runs" / "%2E%2E" / "..%2F..%2Fetc" / "passwd").read_bytes() == b"x"


@pytest.mark.parametrize("key", ["../../etc/passwd", "a//b", "a/./b", "a/", "", "a/b\x00", "a\x1bb"])
def test_check_key_refuses_climbing_empty_and_control_segments(key):
    with pytest.raises(ValueError):
        check_key(key)


def test_check_key_accepts_plain_keys():
    assert check_key("models/resnet50/model.onnx") == "models/resnet50/model.onnx"
    assert check_key("a/..b/c..") == "a/..b/c.."
