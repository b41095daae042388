"""spec.search.buildParallelism: a worker Job builds that many routes at once (as `tune
--build-parallelism N` does), and its pod asks for room for them: the operator's default cpu and
memory requests are one build's, so a sweep Job asks for N times them, where the target sets neither
(a request of its own, or a limit, which Kubernetes then requests). The probe and the confirmation
build nothing and ask for one build's room. Once (the default) leaves every Job as it was."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from enginewright.api.contracts import BatchRequest
from enginewright.api.models import Search, TuningRunSpec
from enginewright.controller.children import RunRef
from enginewright.controller.jobs import job_manifest, scaled, worker_requests
from enginewright.controller.settings import Settings
from enginewright.worker.job import worker_context

RUN = RunRef("run", "team-a", "0123456789abcdef")
SETTINGS = Settings(s3_endpoint="minio:9000", store_secret="store", worker_requests={"cpu": "1", "memory": "2Gi"})


def spec(build_parallelism: int | None = None, resources: dict | None = None) -> TuningRunSpec:
    search = {} if build_parallelism is None else {"buildParallelism": build_parallelism}
    target = {"gpuType": "NVIDIA-H200", **({"resources": resources} if resources else {})}
    return TuningRunSpec.model_validate(
        {
            "model": {"uri": "s3://models/mlp.pt2"},
            "compiler": {"name": "inductor"},
            "accuracy": {"disabled": True, "reason": "test"},
            "search": search,
            "targets": [target],
        }
    )


def requests_of(run_spec: TuningRunSpec, stage: str, batch: str) -> dict:
    job = job_manifest(
        RUN, run_spec, run_spec.targets[0], stage, batch, f"s3://runs/r/{batch}.json", "ab" * 32, SETTINGS, 600
    )
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container["resources"]["requests"]


def test_a_sweep_job_asks_for_room_for_each_build_at_once():
    assert requests_of(spec(3), "stage1", "stage1-b000") == {"cpu": "3", "memory": "6Gi", "nvidia.com/gpu": "1"}
    assert requests_of(spec(3), "stage2", "stage2-b001") == {"cpu": "3", "memory": "6Gi", "nvidia.com/gpu": "1"}


def test_the_probe_and_the_confirmation_build_nothing_and_ask_for_one_builds_room():
    for stage, batch in (("probe", "probe"), ("confirm", "confirm-1a2b3c4d")):
        assert requests_of(spec(3), stage, batch) == {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}


def test_one_build_at_a_time_leaves_the_job_as_it_was():
    assert spec().search.build_parallelism == 1
    assert requests_of(spec(), "stage1", "stage1-b000") == {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}
    plain = job_manifest(RUN, spec(), spec().targets[0], "stage1", "b", "s3://r/b.json", "ab" * 32, SETTINGS, 600)
    once = job_manifest(RUN, spec(1), spec(1).targets[0], "stage1", "b", "s3://r/b.json", "ab" * 32, SETTINGS, 600)
    assert plain["metadata"]["annotations"] == once["metadata"]["annotations"]  # the same Job, the same hash


def test_what_the_target_requests_or_limits_itself_is_its_own():
    own = spec(4, {"requests": {"cpu": "6"}, "limits": {"memory": "12Gi"}})
    # cpu: the target's 6, not 4 x 1; memory: limited without a request, so Kubernetes requests the limit
    assert worker_requests(own.targets[0], SETTINGS, 4) == {"cpu": "6"}
    assert requests_of(own, "stage1", "stage1-b000") == {"cpu": "6", "nvidia.com/gpu": "1"}


def test_quantities_scale_in_their_own_unit():
    assert scaled("2Gi", 3) == "6Gi" and scaled("500m", 3) == "1500m" and scaled("1", 4) == "4"
    assert scaled("1.5Gi", 2) == "3Gi" and scaled("0.5", 3) == "1.5" and scaled("1e3", 2) == "2e3"
    assert scaled("2Gi", 1) == "2Gi" and scaled("0.50", 1) == "0.50"  # once: the very text


@pytest.mark.parametrize("bad", [0, -1, 17])
def test_a_build_parallelism_out_of_bounds_is_refused(bad):
    with pytest.raises(ValidationError, match="build_parallelism|buildParallelism"):
        Search.model_validate({"buildParallelism": bad})


def test_the_jobs_worker_builds_as_many_at_once_as_the_spec_says(tmp_path: Path):
    request = BatchRequest(
        target="NVIDIA-H200", stage="stage1", batch="stage1-b000", bucket="runs", prefix="runs/p", spec=spec(3)
    )

    class Backend:
        engine_suffix = ".inductor.tar"

    ctx = worker_context(request, Backend(), tmp_path / "m", None, tmp_path, None)
    assert ctx.build_parallelism == 3
    request.spec = spec()
    assert worker_context(request, Backend(), tmp_path / "m", None, tmp_path, None).build_parallelism == 1
