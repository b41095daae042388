"""Pure parts of the controller: deterministic Job names within 63 characters, the Job a batch gets,
cache shards that never exceed their limit and never place an entry twice, kstatus conditions."""

from hypothesis import given, strategies as st

from enginewright.api.models import TuningRunSpec
from enginewright.controller.children import RunRef, child_name
from enginewright.controller.jobs import job_manifest, job_name, job_state
from enginewright.controller.settings import Settings
from enginewright.controller.shards import place, size_of
from enginewright.controller.status import conditions

RUN = RunRef("a-very-long-tuning-run-name-for-the-resnet50-model-fp16", "team-a", "0123456789abcdef")
SPEC = TuningRunSpec.model_validate(
    {
        "model": {"uri": "s3://models/resnet50.onnx"},
        "compiler": {"name": "onnxruntime"},
        "accuracy": {"disabled": True, "reason": "test"},
        "search": {"backoffLimit": 3},
        "targets": [
            {
                "gpuType": "NVIDIA-H200",
                "nodeSelector": {"pool": "tuning"},
                "gpusPerJob": 2,
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            }
        ],
    }
)


def test_job_names_are_deterministic_dns_labels_within_63_characters():
    name = job_name(RUN, "NVIDIA-H200", "stage1-b000")
    assert name == job_name(RUN, "NVIDIA-H200", "stage1-b000") and len(name) <= 63
    assert name != job_name(RUN, "NVIDIA-H200", "stage1-b001")
    assert child_name("run", "NVIDIA-H200", "probe") == "run-nvidia-h200-probe"


@given(st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=4))
def test_child_names_are_always_valid_labels(parts):
    import re

    name = child_name(*parts)
    assert len(name) <= 63 and re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", name)


def test_a_batch_job_carries_selector_resources_security_and_limits_from_the_spec():
    settings = Settings(s3_endpoint="minio:9000", store_secret="store")
    job = job_manifest(
        RUN,
        SPEC,
        SPEC.targets[0],
        "stage1",
        "stage1-b000",
        "s3://runs/r/requests/stage1-b000.json",
        "ab" * 32,
        settings,
        600,
    )
    pod = job["spec"]["template"]["spec"]
    assert job["metadata"]["ownerReferences"][0]["uid"] == RUN.uid and "generateName" not in job["metadata"]
    assert job["spec"]["backoffLimit"] == 3 and job["spec"]["activeDeadlineSeconds"] == 600
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200", "pool": "tuning"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu" and pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    env = {e["name"]: e for e in container["env"]}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "store"
    # The request is an object in the store (no environment-variable size limit); its digest is the Job's.
    assert env["ENGINEWRIGHT_BATCH_URI"]["value"] == "s3://runs/r/requests/stage1-b000.json"
    assert env["ENGINEWRIGHT_BATCH_SHA256"]["value"] == "ab" * 32 and "ENGINEWRIGHT_BATCH" not in env
    again = job_manifest(
        RUN,
        SPEC,
        SPEC.targets[0],
        "stage1",
        "stage1-b000",
        "s3://runs/r/requests/stage1-b000.json",
        "ab" * 32,
        settings,
        300,
    )
    assert again["metadata"]["annotations"] == job["metadata"]["annotations"]  # the deadline is not identity
    other = job_manifest(
        RUN,
        SPEC,
        SPEC.targets[0],
        "stage1",
        "stage1-b000",
        "s3://runs/r/requests/stage1-b000.json",
        "cd" * 32,
        settings,
        600,
    )
    assert other["metadata"]["annotations"] != job["metadata"]["annotations"]  # another request, another Job


def test_job_state_reads_conditions():
    assert job_state({"status": {}}) == "active"
    assert job_state({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}) == "succeeded"
    assert job_state({"status": {"conditions": [{"type": "Failed", "status": "True"}]}}) == "failed"


@given(st.lists(st.integers(min_value=1, max_value=300), max_size=60), st.integers(min_value=1, max_value=4))
def test_shards_stay_within_the_limit_and_hold_each_entry_once(sizes, passes):
    limit = 1000
    shards: list[dict[str, str]] = []
    expected = {}
    chunks = [sizes[i::passes] for i in range(passes)]
    for n, chunk in enumerate(chunks):
        new = {f"{n}-{i}.json": "x" * s for i, s in enumerate(chunk)}
        expected.update(new)
        placed = place(shards, {**new, **{k: v for k, v in expected.items() if k not in new}}, limit)
        assert all(i < len(placed.shards) for i in placed.changed)
        shards = placed.shards
    keys = [k for shard in shards for k in shard]
    assert sorted(keys) == sorted(expected) and len(keys) == len(set(keys))
    assert all(size_of(s) <= limit for s in shards)


def test_conditions_follow_kstatus_and_keep_transition_times():
    first = conditions([], 1, "reconciling", "Reconciling", "stage1")
    assert {c["type"]: c["status"] for c in first} == {"Ready": "False", "Reconciling": "True", "Stalled": "False"}
    later = conditions(first, 1, "reconciling", "Reconciling", "stage2")
    assert [c["lastTransitionTime"] for c in later] == [c["lastTransitionTime"] for c in first]
    done = conditions(later, 1, "ready", "Succeeded", "winner")
    assert {c["type"]: c["status"] for c in done} == {"Ready": "True", "Reconciling": "False", "Stalled": "False"}
    assert all(c["observedGeneration"] == 1 for c in done)


def test_a_selector_selects_exactly_the_labels_its_children_carry():
    from enginewright.controller.children import selector

    job = job_manifest(RUN, SPEC, SPEC.targets[0], "stage1", "stage1-b000", "s3://b/k", "0" * 64, Settings(), 600)
    wanted = dict(pair.split("=", 1) for pair in selector(RUN, "NVIDIA-H200").split(","))
    assert wanted.items() <= job["metadata"]["labels"].items() and len(wanted) == 3
    assert "tuning.enginewright.io/target" not in selector(RUN)
