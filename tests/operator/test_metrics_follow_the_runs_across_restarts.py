"""The metrics port as a platform team charts it, with an operator of this test's own (namespaces
`m-*`): a finished run keeps its best speedup and leaves no Job series; the series are rebuilt by an
operator that starts after the run finished; a deleted run's series go; GPU seconds per GPU type,
runs by phase and reconcile errors are there; promlint (client_golang's, as `promtool check metrics`)
finds nothing to say about the exposition."""

from __future__ import annotations

import re
import uuid

import pytest

from tests.cluster.harness import wait_for
from tests.cluster.operator_process import create_store_secret, start_operator
from tests.cluster.promlint import lint
from tests.operator.conftest import RUNS_BUCKET, TEST_INTERVAL, Operator, apply, manifest, wait_condition

KNOB = [{"name": "enable_mem_pattern", "values": ["0"]}]


@pytest.fixture
def m_namespace(cluster, crd_installed, example_in_store):
    name = f"m-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    create_store_secret(cluster, name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


def series(text: str, name: str, **labels) -> float | None:
    """The value of the sample of `name` whose labels include `labels`, or None."""
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
            return float(match.group(2))
    return None


def scrape_until(operator, check, timeout: float, what: str) -> str:
    """The operator's metrics text once `check(text)` holds."""
    return wait_for(lambda: (lambda text: text if check(text) else None)(operator.metrics()), timeout, what, 0.5)


def test_series_follow_the_run_through_a_restart_and_its_deletion(cluster, m_namespace, tmp_path):
    operators = []

    def start() -> Operator:
        started = start_operator(
            cluster,
            tmp_path / f"operator-{len(operators)}.log",
            RUNS_BUCKET,
            ENGINEWRIGHT_NAMESPACES="m-*",
            ENGINEWRIGHT_RECONCILE_INTERVAL=TEST_INTERVAL,
        )
        operators.append(Operator(started.process, started.log, started.metrics_port, started.health_port))
        return operators[-1]

    run = {"namespace": m_namespace, "run": "charted", "target": "cpu"}
    try:
        operator = start()
        apply(cluster, m_namespace, manifest("charted", knobs=KNOB, publish={"enabled": False}))
        status = wait_condition(cluster, m_namespace, "charted", "Ready", 240)
        speedup = status["targets"][0]["winner"]["speedup"]
        text = scrape_until(
            operator,
            lambda t: series(t, "enginewright_best_speedup", **run),
            30,
            "the best speedup on the metrics port",
        )
        assert series(text, "enginewright_best_speedup", **run) == pytest.approx(speedup)
        assert series(text, "enginewright_active_jobs", **run) is None  # finished: no Job series left
        assert series(text, "enginewright_runs", phase="Succeeded") == 1
        assert series(text, "enginewright_gpu_seconds_total", gpu_type="cpu") > 0
        assert "# TYPE enginewright_reconcile_errors_total counter" in text
        assert lint(text) == []

        operator.stop()  # a new operator rebuilds the series from the cluster
        operator = start()
        text = scrape_until(
            operator,
            lambda t: series(t, "enginewright_best_speedup", **run),
            60,
            "the best speedup rebuilt after a restart",
        )
        assert series(text, "enginewright_best_speedup", **run) == pytest.approx(speedup)
        assert series(text, "enginewright_runs", phase="Succeeded") == 1

        cluster.kubectl("delete", "trun", "charted", "-n", m_namespace, "--wait=true", "--timeout=60s")
        text = scrape_until(operator, lambda t: 'run="charted"' not in t, 30, "the deleted run's series removed")
        assert series(text, "enginewright_runs", phase="Succeeded") == 0
        for running in operators:
            running.assert_clean()
    finally:
        for running in operators:
            running.stop()
