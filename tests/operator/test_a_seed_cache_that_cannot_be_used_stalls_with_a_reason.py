"""A `spec.search.seedCache` that cannot be used stops the run with a reason, a Warning Event and no
tuning Job, never a crash loop: another namespace's runs (refused even though the store would let
the key read them: a shared runs bucket), a seed that is not there, a file that is not a trtexec
cache (found after the probe). A URL that is not s3://bucket/key, or a seed with reuse none, is
refused by the API server at apply."""

import json
import subprocess

import pytest

from enginewright.store.layout import RunKeys, run_prefix
from tests.operator.conftest import RUNS_BUCKET, jobs, manifest
from tests.operator.test_a_seed_cache_with_the_runs_fingerprint_is_reused import SEEDS, put
from tests.operator.test_invalid_runs_stall_with_a_reason_and_no_jobs import KNOB, stalled


def test_another_namespaces_runs_cannot_seed_a_run(cluster, operator, run_namespace, other_namespace, s3):
    victim = RunKeys(run_prefix(other_namespace, "first", "11111111-0000", "cpu"))
    put(s3, RUNS_BUCKET, victim.entry("abc"), b'{"targetx": 1}')  # something there to take
    doc = manifest("thief", knobs=KNOB)
    doc["spec"]["search"]["seedCache"] = f"s3://{RUNS_BUCKET}/{victim.prefix}"
    stalled(cluster, run_namespace, doc, "SeedCacheNotAllowed", ["spec.search.seedCache", "another namespace"], False)
    operator.assert_clean()


@pytest.mark.parametrize("case", ["missing", "malformed"])
def test_a_seed_that_is_not_a_cache(cluster, operator, run_namespace, s3, example_in_store, case):
    if not s3.bucket_exists(SEEDS):
        s3.make_bucket(SEEDS)
    doc = manifest(case, knobs=KNOB)
    uri = f"s3://{SEEDS}/{run_namespace}/{case}.jsonl"
    doc["spec"]["search"]["seedCache"] = uri
    if case == "missing":
        stalled(cluster, run_namespace, doc, "ObjectNotFound", ["spec.search.seedCache", uri], False)
    else:
        put(s3, SEEDS, f"{run_namespace}/{case}.jsonl", b'{"iter": 0, "build_route": ""}\n')
        stalled(cluster, run_namespace, doc, "InvalidSeedCache", ["spec.search.seedCache", "header"], True)
    operator.assert_clean()


@pytest.mark.parametrize(
    "search, words",
    [
        ({"seedCache": "https://example.com/cache.jsonl"}, "seedCache"),
        ({"seedCache": f"s3://{SEEDS}/x", "reuse": "none"}, "seedCache needs reuse"),
    ],
)
def test_the_api_server_refuses_a_seed_it_can_check(cluster, operator, run_namespace, search, words):
    doc = manifest("refused", knobs=KNOB)
    doc["spec"]["search"].update(search)
    done = subprocess.run(
        [
            str(cluster.binaries / "kubectl"),
            "--kubeconfig",
            str(cluster.kubeconfig),
            "apply",
            "-n",
            run_namespace,
            "-f",
            "-",
        ],
        input=json.dumps(doc),
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and words in done.stderr, done.stderr
    assert jobs(cluster, run_namespace) == []
