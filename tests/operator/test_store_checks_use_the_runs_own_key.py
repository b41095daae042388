"""The pre-flight check reads the model and reference data with the run's own store key (its
namespace's Secret), not the operator's: a namespace whose key does not work learns nothing about
which objects exist. Both runs below stall alike, before any Job, with S3's own refusal in the message."""

import base64

from tests.operator.conftest import apply, condition, event_posted, jobs, manifest, wait_condition

KNOB = [{"name": "enable_mem_pattern", "values": ["0"]}]


def test_a_key_that_does_not_work_learns_nothing_about_other_objects(cluster, operator, namespace):
    cluster.kubectl(
        "create",
        "secret",
        "generic",
        "enginewright-store",
        "-n",
        namespace,
        "--from-literal=AWS_ACCESS_KEY_ID=not-a-key",
        "--from-literal=AWS_SECRET_ACCESS_KEY=wrong-secret",
    )
    present = manifest("present", knobs=KNOB)  # the example model: it exists
    absent = manifest("absent", knobs=KNOB)
    absent["spec"]["model"]["uri"] = "s3://enginewright-models/example/absent.onnx"
    messages = {}
    for doc in (present, absent):
        apply(cluster, namespace, doc)
    for doc in (present, absent):
        name = doc["metadata"]["name"]
        status = wait_condition(cluster, namespace, name, "Stalled", 120)
        stall = condition(status, "Stalled")
        assert stall["reason"] == "StoreAccessDenied", status
        assert "spec.model.uri" in stall["message"] and f"Secret {namespace}/enginewright-store" in stall["message"]
        event_posted(cluster, namespace, name, lambda e: e["reason"] == "StoreAccessDenied")
        messages[name] = stall["message"].replace(doc["spec"]["model"]["uri"], "URI")
    assert messages["present"] == messages["absent"], messages  # nothing tells the two apart
    # S3's own refusal code (versitygw names an unknown key XAdminUserNotFound; AWS, InvalidAccessKeyId)
    assert any(code in messages["present"] for code in ("XAdminUserNotFound", "InvalidAccessKeyId")), messages
    assert jobs(cluster, namespace) == []
    operator.assert_clean()


def test_the_runs_key_is_what_reads_the_objects(cluster, operator, namespace, s3):
    """The Secret's key is used as it is: the operator's working key is not a fallback."""
    from tests.cluster.harness import S3_ACCESS_KEY

    cluster.kubectl(
        "create",
        "secret",
        "generic",
        "enginewright-store",
        "-n",
        namespace,
        f"--from-literal=AWS_ACCESS_KEY_ID={S3_ACCESS_KEY}",
        "--from-literal=AWS_SECRET_ACCESS_KEY=not-the-secret",
    )
    apply(cluster, namespace, manifest("badsecret", knobs=KNOB))
    stall = condition(wait_condition(cluster, namespace, "badsecret", "Stalled", 120), "Stalled")
    assert stall["reason"] == "StoreAccessDenied" and "SignatureDoesNotMatch" in stall["message"], stall
    secret = cluster.kubectl(
        "get", "secret", "enginewright-store", "-n", namespace, "-o", "jsonpath={.data.AWS_SECRET_ACCESS_KEY}"
    ).stdout
    assert base64.b64decode(secret) == b"not-the-secret"
    operator.assert_clean()
