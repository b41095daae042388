"""Per-run series come from each run's status and go with it (pure: the operator's registry, no cluster)."""

from prometheus_client import REGISTRY, generate_latest

from enginewright.controller import metrics


def sample(name, **labels):
    return REGISTRY.get_sample_value(name, labels)


def status(phase, stage, active=0, speedup=None):
    target = {"gpuType": "NVIDIA-H200", "stage": stage, "activeJobs": active}
    if speedup is not None:
        target["winner"] = {"routeId": "x", "route": "-a=1", "speedup": speedup}
    return {"phase": phase, "targets": [target]}


def test_a_run_series_live_and_go_with_it():
    run = {"namespace": "team-a", "run": "r1", "target": "NVIDIA-H200"}
    metrics.observe_run("uid-1", "team-a", "r1", status("Running", "stage1", active=2), finished=False)
    assert sample("enginewright_active_jobs", **run) == 2
    assert sample("enginewright_runs", phase="Running") >= 1
    metrics.observe_run("uid-1", "team-a", "r1", status("Succeeded", "done", speedup=1.25), finished=True)
    assert sample("enginewright_active_jobs", **run) is None  # finished: no Job series left behind
    assert sample("enginewright_best_speedup", **run) == 1.25  # its result stays while the run exists
    assert sample("enginewright_runs", phase="Succeeded") >= 1
    metrics.forget_run("uid-1", "team-a", "r1")
    assert sample("enginewright_best_speedup", **run) is None
    assert 'run="r1"' not in generate_latest(REGISTRY).decode()


def test_forgetting_a_run_never_seen_is_harmless():
    metrics.forget_run("uid-unknown", "team-b", "r2", ["cpu"])
    assert sample("enginewright_best_speedup", namespace="team-b", run="r2", target="cpu") is None
