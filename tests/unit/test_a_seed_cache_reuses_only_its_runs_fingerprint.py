"""What `spec.search.seedCache` may give a run (`controller.seed`, pure parts): an entry of ours only
when its fingerprint is the run's for its route, never the default route's, never a copy, the newest
of a route; no route of a trtexec cache (its format records no fingerprint), each counted with the
reason; and the spec and tenancy rules that refuse a seed before anything is read."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from enginewright.api.models import TuningRunSpec
from enginewright.api.routes import Route, route_id
from enginewright.controller.seed import (
    DEFAULT_NOT_REUSABLE,
    TRTEXEC_NOT_REUSABLE,
    Seeded,
    judge,
    read_trtexec,
    seed_objects,
)
from enginewright.controller.settings import Settings
from enginewright.controller.tenancy import seed_refusal
from enginewright.trtexec.imports import import_file
from tests.unit.test_reuse_needs_the_same_fingerprint import ROUTE, base, entry

WRITER = Path(__file__).parents[1] / "trtexec_writer"
DEFAULT = route_id("")


def test_only_an_entry_with_the_runs_fingerprint_is_taken():
    other = Route.of({"max_autotune": "0"})
    old = entry(base(), finished_at="2026-12-01T00:00:00Z")
    new = entry(base(), finished_at="2026-12-02T00:00:00Z")
    found = [
        ("seed/entries/a-old.json", old),
        ("seed/entries/a.json", new),
        ("seed/entries/b.json", entry(base(model_sha256="f" * 64), route=other)),
        ("seed/entries/d.json", entry(base(), route=Route.of({}))),
    ]
    taken, why = judge(found, base(), DEFAULT, have=set())
    assert {r: k for r, (k, _) in taken.items()} == {ROUTE.id: "seed/entries/a.json"}  # the newest
    assert why[DEFAULT] == DEFAULT_NOT_REUSABLE
    assert why[other.id] == "another fingerprint (model_sha256 differ)"
    assert judge(found, base(), DEFAULT, have={ROUTE.id})[0] == {}  # the run has its own entry


def test_entries_without_a_fingerprint_or_copies_are_not_reusable():
    imported = entry(None).model_copy(update={"stage": "imported"})
    copy = entry(base()).model_copy(update={"reused_from": "first-1: s3://runs/x.json"})
    assert judge([("k", imported)], base(), DEFAULT, set()) == ({}, {ROUTE.id: TRTEXEC_NOT_REUSABLE})
    assert judge([("k", entry(None))], base(), DEFAULT, set())[1] == {ROUTE.id: "no fingerprint (written before them)"}
    assert "a copy of another run's entry" in judge([("k", copy)], base(), DEFAULT, set())[1][ROUTE.id]


def test_a_route_taken_from_one_entry_is_not_also_reported_as_refused():
    taken, why = judge([("a", entry(base(model_sha256="f" * 64))), ("b", entry(base()))], base(), DEFAULT, have=set())
    assert set(taken) == {ROUTE.id} and why == {}


def test_a_seed_prefix_is_read_for_trtexec_files_and_entries_only():
    listed = [
        "seed/fast.jsonl",
        "seed/runs/local/entries/abc.json",
        "seed/runs/local/engines/abc.ort.tar",
        "seed/runs/local/imports/tensorrt-tuner-2.19.15/0123456789ab/import.json",
        "seed/runs/local/imports/tensorrt-tuner-2.19.15/0123456789ab/trtexec.jsonl",
        "seed/summary.json",
    ]
    assert seed_objects(listed) == (
        ["seed/fast.jsonl", "seed/runs/local/imports/tensorrt-tuner-2.19.15/0123456789ab/trtexec.jsonl"],
        ["seed/runs/local/entries/abc.json"],
    )


def test_a_trtexec_file_is_read_as_cache_import_reads_it(tmp_path):
    source = WRITER / "fast.jsonl"
    imported, cache, _ = import_file(tmp_path, source)
    again = read_trtexec(source.read_bytes(), imported.meta)
    assert again.route_ids == cache.route_ids and again.outcomes == cache.outcomes and len(again.route_ids) > 1
    assert again.compiler == "tensorrt-tuner-2.19.15"
    truncated = source.read_bytes()[:-20]
    assert len(read_trtexec(truncated).damaged) == 1  # a damaged line is skipped, as import skips it
    with pytest.raises(ValueError, match="header"):
        read_trtexec(b'{"iter":0}\n')


def test_the_status_line_says_what_was_seeded_and_why_the_rest_was_not():
    note = Seeded(source="s3://b/seed", routes={"r1": "x"}, not_reusable={TRTEXEC_NOT_REUSABLE: 7}, damaged=1).note
    assert note.startswith("s3://b/seed: 1 route(s) seeded") and f"7 not reusable: {TRTEXEC_NOT_REUSABLE}" in note
    assert "1 damaged" in note


def spec(**search) -> TuningRunSpec:
    return TuningRunSpec.model_validate(
        {
            "model": {"uri": "s3://models/m.onnx"},
            "compiler": {"name": "onnxruntime"},
            "accuracy": {"disabled": True, "reason": "test"},
            "targets": [{"gpuType": "cpu", "gpusPerJob": 0}],
            "search": search,
        }
    )


@pytest.mark.parametrize(
    "uri",
    [
        "s3://enginewright/runs/team-b/first-11111111/cpu",
        "s3://enginewright/runs/team-ab/first-11111111/cpu",
        "s3://enginewright/runs",
        "s3://enginewright/runs/team-b",
    ],
)
def test_a_seed_in_another_namespaces_runs_is_refused(uri):
    refusal = seed_refusal(spec(seedCache=uri), "team-a", Settings())
    assert refusal is not None and refusal.reason == "SeedCacheNotAllowed" and uri in refusal.message


@pytest.mark.parametrize(
    "uri", ["s3://enginewright/runs/team-a/first-11111111/cpu", "s3://enginewright/runs/team-a", "s3://seeds/r50.jsonl"]
)
def test_a_seed_in_its_own_runs_or_another_bucket_is_left_to_the_runs_key(uri):
    assert seed_refusal(spec(seedCache=uri), "team-a", Settings()) is None


@pytest.mark.parametrize(
    "search, error",
    [
        ({"seedCache": "s3://seeds/a/../b.jsonl"}, "'..' segments"),
        ({"seedCache": "http://seeds/b.jsonl"}, "s3://bucket/key"),
        ({"seedCache": "s3://seeds/b.jsonl", "reuse": "none"}, "seedCache needs spec.search.reuse sameFingerprint"),
    ],
)
def test_a_seed_the_spec_cannot_use_is_refused_by_the_model(search, error):
    with pytest.raises(ValidationError, match=error):
        spec(**search)
