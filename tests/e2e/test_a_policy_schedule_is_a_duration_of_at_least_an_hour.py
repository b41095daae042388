"""The TuningPolicy CRD on the real API server refuses a `triggers.schedule` that is not a duration
(h, m, s) or is shorter than an hour at apply, saying why; a valid one is stored as written."""

from __future__ import annotations

import copy

import pytest

from tests.conftest import get_json
from tests.e2e.test_a_policy_template_is_checked_but_editable import EXAMPLE, apply


def with_schedule(schedule: str, name: str) -> dict:
    doc = copy.deepcopy(EXAMPLE)
    doc["metadata"]["name"] = name
    doc["spec"]["triggers"]["schedule"] = schedule
    return doc


@pytest.mark.parametrize(
    "schedule,complaint",
    [
        ("30m", "must be at least 1h"),
        ("59m59s", "must be at least 1h"),
        ("7d", "should match"),
        ("1 h", "should match"),
        # past Go's largest duration (2562047h): it matched the old pattern, and the rule's duration()
        # then failed with an evaluation error instead of a reason
        ("3000000h", "should match"),
    ],
)
def test_a_schedule_shorter_than_an_hour_or_not_a_duration_is_refused(
    cluster, crd_installed, namespace, schedule, complaint
):
    refused = apply(cluster, namespace, with_schedule(schedule, "bad"), check=False)
    assert refused.returncode != 0 and "spec.triggers.schedule" in refused.stderr, refused.stderr
    assert complaint in refused.stderr, refused.stderr


@pytest.mark.parametrize("schedule", ["1h30m", "999999h9999999m99999999s"])  # the longest the pattern allows
def test_a_schedule_of_an_hour_or_more_is_stored(cluster, crd_installed, namespace, schedule):
    apply(cluster, namespace, with_schedule(schedule, "weekly"))
    assert get_json(cluster, "tpol", "weekly", "-n", namespace)["spec"]["triggers"]["schedule"] == schedule
