"""`policyIntervalSeconds` (default 60) reaches the operator as ENGINEWRIGHT_POLICY_INTERVAL, read as
its settings read it (the seconds between checks of a TuningPolicy's targets); the schema refuses a
value that is not a number above 0."""

from __future__ import annotations

import json

import pytest

from tests.chart.chart import CHART, helm, operator_settings

STORE = {"store.endpoint": "minio.minio.svc:9000"}


def test_the_policy_interval_is_60_seconds_by_default_and_can_be_set(cluster):
    assert operator_settings(cluster, STORE).policy_interval == 60.0
    assert operator_settings(cluster, {**STORE, "policyIntervalSeconds": 300}).policy_interval == 300.0
    assert operator_settings(cluster, {**STORE, "policyIntervalSeconds": 2.5}).policy_interval == 2.5


@pytest.mark.parametrize("value,complaint", [(0, "exclusiveMinimum"), (-5, "exclusiveMinimum"), ("1m", "want number")])
def test_an_interval_that_is_not_a_positive_number_is_refused(cluster, value, complaint):
    refused = helm(
        cluster,
        "template",
        "r",
        str(CHART),
        f"--set-json=store.endpoint={json.dumps('m:9000')}",
        f"--set-json=policyIntervalSeconds={json.dumps(value)}",
        check=False,
    )
    assert refused.returncode != 0 and "/policyIntervalSeconds" in refused.stderr, refused.stderr
    assert complaint in refused.stderr, refused.stderr  # the value's check, not "additional properties"
