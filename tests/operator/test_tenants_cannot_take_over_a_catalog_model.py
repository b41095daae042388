"""A namespace is a tenant boundary for the catalog: a catalog model name belongs to the namespace
that first published it (recorded in its index), runs publish only into the buckets the operator
allows, and an allowed bucket that does not exist is a Stalled condition, not a retry loop. Each
refusal: Stalled with its reason, a Warning Event, no Job, nothing written to the catalog."""

import json
import uuid

from tests.cluster.harness import wait_for
from tests.operator.conftest import (
    PUBLISH_BUCKETS,
    RUNS_BUCKET,
    apply,
    condition,
    event_posted,
    jobs,
    manifest,
    wait_condition,
)

KNOB = [{"name": "enable_mem_pattern", "values": ["0"]}]


def refused(cluster, namespace, name, reason, words):
    status = wait_condition(cluster, namespace, name, "Stalled", 120)
    stall = condition(status, "Stalled")
    assert stall["reason"] == reason, status
    for word in words:
        assert word in stall["message"], stall["message"]
    assert jobs(cluster, namespace) == []
    event_posted(cluster, namespace, name, lambda e: e["type"] == "Warning" and e["reason"] == reason)
    return stall


def index(s3, model):
    return json.loads(s3.get_object(RUNS_BUCKET, f"catalog/{model}/index.json").read())


def test_a_model_name_published_by_one_namespace_is_refused_to_another(
    cluster, operator, s3, run_namespace, other_namespace
):
    model = f"demo-{uuid.uuid4().hex[:6]}"
    apply(cluster, run_namespace, manifest("owner", knobs=KNOB, publish={"modelName": model}))
    owner = wait_condition(cluster, run_namespace, "owner", "Ready", 240)
    published = index(s3, model)
    assert published["owner"] == {"namespace": run_namespace} and len(published["entries"]) == 1

    # Another tenant names the same catalog model: refused before any Job, the owner not named.
    apply(cluster, other_namespace, manifest("intruder", knobs=KNOB, publish={"modelName": model}))
    stall = refused(cluster, other_namespace, "intruder", "CatalogModelTaken", ["spec.publish.modelName", model])
    assert run_namespace not in stall["message"]
    after = index(s3, model)
    assert after == published  # the index (owner and entries) is as the owner left it
    assert after["entries"][0]["sha256"] == owner["targets"][0]["engineSha256"]
    operator.assert_clean()


def test_a_run_cannot_publish_into_a_bucket_the_operator_does_not_allow(cluster, operator, s3, run_namespace):
    # The models bucket exists and the operator's key can write it: today's target of the attack.
    apply(cluster, run_namespace, manifest("elsewhere", knobs=KNOB, publish={"bucket": "enginewright-models"}))
    refused(
        cluster,
        run_namespace,
        "elsewhere",
        "PublishBucketNotAllowed",
        ["spec.publish.bucket", "enginewright-models", RUNS_BUCKET],
    )
    assert not list(s3.list_objects("enginewright-models", prefix="catalog/", recursive=True))
    operator.assert_clean()


def test_an_allowed_bucket_that_does_not_exist_stalls_with_store_bucket_missing(cluster, operator, s3, run_namespace):
    bucket = PUBLISH_BUCKETS[0]
    assert not s3.bucket_exists(bucket)
    apply(cluster, run_namespace, manifest("nobucket", knobs=KNOB, publish={"bucket": bucket}))
    refused(cluster, run_namespace, "nobucket", "StoreBucketMissing", ["spec.publish.bucket", bucket])
    operator.assert_clean()


def test_two_namespaces_racing_for_a_new_name_leave_one_owner(cluster, operator, s3, run_namespace, other_namespace):
    """Neither run finds an index at its pre-flight check; the check is repeated when publishing,
    under the index's lock, so the second to publish is refused and the index has one owner."""

    from tests.operator.conftest import run_status

    model = f"race-{uuid.uuid4().hex[:6]}"
    for namespace in (run_namespace, other_namespace):
        apply(cluster, namespace, manifest("racer", knobs=KNOB, publish={"modelName": model}))

    def both_ended() -> dict | None:
        states = {ns: run_status(cluster, ns, "racer") for ns in (run_namespace, other_namespace)}
        ended = [s for s in states.values() if "True" in (condition(s, c).get("status") for c in ("Ready", "Stalled"))]
        return states if len(ended) == 2 else None

    states = wait_for(both_ended, 300, "both racers Ready or Stalled", interval=0.5)
    ready = [ns for ns, s in states.items() if condition(s, "Ready").get("status") == "True"]
    stalled = [ns for ns, s in states.items() if condition(s, "Stalled").get("status") == "True"]
    assert len(ready) == 1 and len(stalled) == 1, states
    assert condition(states[stalled[0]], "Stalled")["reason"] == "CatalogModelTaken", states[stalled[0]]
    published = index(s3, model)
    assert published["owner"] == {"namespace": ready[0]}
    assert [e["run"] for e in published["entries"]] == [f"{ready[0]}/racer"]
    operator.assert_clean()


def test_a_publish_bucket_removed_while_the_run_tunes_stalls_when_publishing(cluster, operator, s3, run_namespace):
    """The bucket passed the pre-flight check and is gone by the time the winner is published: the
    run stalls with StoreBucketMissing (not a traceback every pass)."""

    from tests.operator.conftest import run_status

    bucket = PUBLISH_BUCKETS[1]
    s3.make_bucket(bucket)
    apply(
        cluster,
        run_namespace,
        manifest(
            "vanish",
            knobs=KNOB,
            publish={"bucket": bucket},
            timing={"warmupIterations": 2, "roundSeconds": 0.1, "minRounds": 4, "maxRounds": 4},
        ),
    )
    wait_for(
        lambda: any(
            t.get("stage") == "stage1" for t in run_status(cluster, run_namespace, "vanish").get("targets") or []
        ),
        120,
        "the run's stage 1",
        interval=0.3,
        detail=lambda: run_status(cluster, run_namespace, "vanish"),
    )
    s3.remove_bucket(bucket)  # empty: nothing is published before the decision
    stall = condition(wait_condition(cluster, run_namespace, "vanish", "Stalled", 240), "Stalled")
    assert stall["reason"] == "StoreBucketMissing" and bucket in stall["message"], stall
    assert "removed after the run's checks" in stall["message"]  # found when publishing, not before
    event_posted(cluster, run_namespace, "vanish", lambda e: e["reason"] == "StoreBucketMissing")
    operator.assert_clean()
