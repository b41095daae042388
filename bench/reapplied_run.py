"""A TuningRun re-applied after a delete (as GitOps does): its builds, Jobs and wall time against the
first run's, and against a third run with `spec.search.reuse: none`, on the real local control plane
and S3 store (no GPU: ONNX Runtime on the CPU node, the example MLP, real workers run by the node
agent).

    flock /tmp/ew-cluster.lock python bench/reapplied_run.py --repeat 2 --out OUT

Each repetition gets a fresh namespace (nothing of an earlier repetition to reuse) and, in it, one
manifest applied three times under one name: `first`; deleted and applied again unchanged
(`reapplied`); deleted and applied again with `reuse: none` (`reuse-none`). Per run: wall time from
`kubectl apply` to the Ready condition (status polled every 0.2 s), the Jobs the run owned (by owner
uid), the engine builds its worker Jobs did (their pods' own lines "[<batch>] N routes (default
included), built ..."), the routes it measured itself and the ones it took from an earlier run (its
entries in the store, with or without `reusedFrom`), and what its status says (`reused`, the winner,
the decision). OUT gets `summary.json` (from these measurements only), `table.md`, the raw
per-run records (`runs.jsonl`), the operator's log and each Job's pod log (`logs/<repetition>-<run>/`).

Builds are counted from the worker pods' logs, not from the entries: every batch builds the default
route once more as its own baseline (`worker/batch.py`), so a run of k batches builds the default k
times while writing one entry for it. The entries count routes measured; the pod lines count
compiler invocations, which is what reuse saves.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "examples"), str(REPO / "operator")]

from enginewright.worker.batch import KEPT_DEFAULT  # noqa: E402  (the worker's own words)
from tests.cluster.harness import LocalCluster, wait_for  # noqa: E402
from tests.cluster.operator_process import create_store_secret, start_operator, upload_example  # noqa: E402

BUCKET = "enginewright"
NAME = "reapplied"
KINDS = ("first", "reapplied", "reuse-none")
# Mixed search over five single-knob routes; stage 2 combines the knobs that improved on this host.
KNOBS = [
    {"name": "graph_optimization_level", "values": ["basic", "extended"]},
    {"name": "enable_mem_pattern", "values": ["0"]},
    {"name": "enable_cpu_mem_arena", "values": ["0"]},
    {"name": "session.intra_op.allow_spinning", "values": ["0"]},
]
RECONCILE_INTERVAL = "1"  # seconds: the harness's operator default (the shipped default is 3)
ROUTES_PER_JOB = 2  # several batches, so the default's rebuild by batches that start at once shows
# a batch's builds: its routes and the default, or its routes alone where it loads the default's kept engine
BATCH_LINE = re.compile(
    rf"^\[(?P<batch>[^\]]+)\] (?P<builds>\d+) routes (?:\(default included\)|and {re.escape(KEPT_DEFAULT)}), built ",
    re.M,
)


def tuning_run(namespace: str, reuse: str | None, search_changes: dict) -> dict:
    """The benchmark's manifest: the operator tests' example run (short timing, confirmation round of
    the top 2 over 3 rounds of 2 loads), mixed search over `KNOBS`, `search_changes` set in
    spec.search; `reuse` None leaves the field out (its default, sameFingerprint)."""
    from tests.operator.conftest import manifest

    doc = manifest(NAME, mode="mixed", knobs=KNOBS)
    doc["metadata"]["namespace"] = namespace
    search = doc["spec"]["search"]
    search["routesPerJob"] = ROUTES_PER_JOB
    search.update(search_changes)
    if reuse is not None:
        search["reuse"] = reuse
    doc["spec"].setdefault("publish", {})["modelName"] = f"reapplied-{namespace}"
    return doc


def builds_in_log(text: str) -> dict[str, int]:
    """Batch -> engine builds, from a worker pod's log: the batch says how many routes it builds, the
    default (its baseline) included unless it loads the engine an earlier batch kept, before it
    starts. A batch with nothing left to build says no such line."""
    return {m["batch"]: int(m["builds"]) for m in BATCH_LINE.finditer(text)}


def kubectl_json(cluster, *args: str) -> dict:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def settled(cluster, namespace: str) -> dict | None:
    """The run's object once its Ready or its Stalled condition is True (a stall ends the wait too:
    `wait_for` retries on exceptions, so raising here would only wait out the timeout)."""
    item = kubectl_json(cluster, "trun", NAME, "-n", namespace)
    conditions = {c["type"]: c.get("status") for c in (item.get("status") or {}).get("conditions") or []}
    return item if "True" in (conditions.get("Ready"), conditions.get("Stalled")) else None


def owned_jobs(cluster, namespace: str, uid: str) -> list[dict]:
    items = kubectl_json(cluster, "jobs", "-n", namespace)["items"]
    return [j for j in items if any(o.get("uid") == uid for o in j["metadata"].get("ownerReferences") or [])]


def pod_logs(cluster, namespace: str, job: str) -> str:
    """The node agent's log files of the Job's pods (`<workdir>/pods/logs/<ns>_<pod>_<container>.log`)."""
    pods = kubectl_json(cluster, "pods", "-n", namespace, "-l", f"job-name={job}")["items"]
    logs = cluster.workdir / "pods" / "logs"
    return "".join(
        path.read_text(errors="replace")
        for pod in pods
        for path in sorted(logs.glob(f"{namespace}_{pod['metadata']['name']}_*.log"))
    )


def store_entries(s3, namespace: str, uid: str) -> list[dict]:
    from enginewright.store.layout import RunKeys, run_prefix

    keys = RunKeys(run_prefix(namespace, NAME, uid, "cpu"))
    return [
        json.loads(s3.get_object(BUCKET, o.object_name).read())
        for o in s3.list_objects(BUCKET, prefix=keys.entries, recursive=True)
    ]


def measure_run(cluster, s3, namespace: str, kind: str, search: dict, timeout: float, logs: Path) -> dict:
    """Apply the manifest of `kind`, wait for Ready, and record what the run did; its worker pods'
    logs are copied into `logs`."""
    doc = tuning_run(namespace, "none" if kind == "reuse-none" else None, search)
    began = time.monotonic()
    cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
    item = wait_for(lambda: settled(cluster, namespace), timeout, f"{namespace}/{NAME} ({kind}) to be Ready", 0.2)
    wall = time.monotonic() - began
    if not any(c["type"] == "Ready" and c["status"] == "True" for c in item["status"]["conditions"]):
        raise RuntimeError(f"{namespace}/{NAME} ({kind}) stalled: {json.dumps(item['status'])[:3000]}")
    uid = item["metadata"]["uid"]
    (target,) = item["status"]["targets"]
    jobs = owned_jobs(cluster, namespace, uid)
    stages: dict[str, int] = {}
    builds: dict[str, int] = {}
    for job in jobs:
        stage = job["metadata"]["labels"].get("tuning.enginewright.io/stage", "?")
        stages[stage] = stages.get(stage, 0) + 1
        text = pod_logs(cluster, namespace, job["metadata"]["name"])
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"{job['metadata']['name']}.log").write_text(text)
        if stage not in ("probe", "confirm"):  # the probe lists knobs; a confirmation loads kept engines
            found = builds_in_log(text)
            builds.update({f"{job['metadata']['name']}/{batch}": n for batch, n in found.items()})
    waited = [
        e["message"]
        for e in kubectl_json(cluster, "events", "-n", namespace)["items"]
        if e["involvedObject"].get("uid") == uid and e["reason"] == "DeletedRunsChildren"
    ]
    entries = store_entries(s3, namespace, uid)
    own = sorted(e["routeId"] for e in entries if not e.get("reusedFrom"))
    winner = target.get("winner") or {}
    return {
        "kind": kind,
        "uid": uid,
        "wall_s": round(wall, 2),
        "load_average_1m": round(os.getloadavg()[0], 2),  # of the machine, when the run was Ready
        "builds": sum(builds.values()),
        "builds_by_batch": builds,
        "routes_measured": len(own),
        "routes_reused": len(entries) - len(own),
        "measured_route_ids": own,
        "jobs": len(jobs),
        "jobs_by_stage": stages,
        # the deleted run's children it waited for the garbage collector to remove (its events)
        "waited_for_deleted_run": waited,
        "status": {
            "planned": target.get("planned"),
            "reused": target.get("reused"),
            "reusedFrom": target.get("reusedFrom"),
            "winner": winner.get("route"),
            "decision": target.get("decision"),
            "message": target.get("message"),
            "gpuSeconds": target.get("gpuSeconds"),
        },
    }


def delete_run(cluster, namespace: str, uid: str, timeout: float) -> None:
    """`kubectl delete` as GitOps does on a removed manifest: wait until the object and its Jobs are
    gone, so the next apply is a new object (a new uid) and nothing of the old run is still running."""
    cluster.kubectl("delete", "trun", NAME, "-n", namespace, "--wait=true", f"--timeout={int(timeout)}s")
    wait_for(lambda: not owned_jobs(cluster, namespace, uid), timeout, f"the Jobs of {namespace}/{NAME} to go", 0.2)


def repetition(cluster, s3, index: int, search: dict, timeout: float, out: Path) -> list[dict]:
    namespace = f"reapplied-{index}-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", namespace)
    create_store_secret(cluster, namespace)
    runs = []
    for kind in KINDS:
        run = measure_run(cluster, s3, namespace, kind, search, timeout, out / "logs" / f"{index}-{kind}")
        print(json.dumps({"repetition": index, **run}), flush=True)
        with open(out / "runs.jsonl", "a") as handle:  # as it goes: a later failure keeps these
            handle.write(json.dumps({"repetition": index, **run}) + "\n")
        runs.append(run)
        delete_run(cluster, namespace, run["uid"], timeout)
    return runs


ROWS = (
    ("engine builds (worker pod lines)", "builds"),
    ("routes measured by the run (own entries)", "routes_measured"),
    ("routes reused (entries with reusedFrom)", "routes_reused"),
    ("Jobs created (owned by the run)", "jobs"),
    ("wall time, apply to Ready (s)", "wall_s"),
)


def summarize(repetitions: list[list[dict]]) -> dict:
    """Per kind of run, each figure's values across repetitions and their median."""
    out: dict[str, dict] = {}
    for kind in KINDS:
        runs = [r for rep in repetitions for r in rep if r["kind"] == kind]
        out[kind] = {
            key: {"values": [r[key] for r in runs], "median": statistics.median(r[key] for r in runs)}
            for _, key in ROWS
        }
        out[kind]["jobs_by_stage"] = [r["jobs_by_stage"] for r in runs]
        out[kind]["winners"] = [r["status"]["winner"] for r in runs]
    return out


def table(summary: dict) -> str:
    """A Markdown table: one row per figure, one column per kind of run (values across repetitions)."""

    def cell(figure: dict) -> str:
        return " / ".join(f"{v:g}" for v in figure["values"])

    lines = ["| | first run | re-applied | reuse: none |", "| --- | --- | --- | --- |"]
    for label, key in ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(summary[kind][key]) for kind in KINDS) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="repetitions, each in a fresh namespace")
    parser.add_argument("--out", type=Path, required=True, help="folder for summary.json, table.md, runs.jsonl")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a run may take to be Ready")
    parser.add_argument(
        "--noise-margin", type=float, help="spec.search.noiseMargin (default: the field's); small: more stage 2"
    )
    parser.add_argument(
        "--save-all-engines", action="store_true", help="spec.search.saveAllEngines: every route a candidate"
    )
    args = parser.parse_args()
    search = {"saveAllEngines": True} if args.save_all_engines else {}
    if args.noise_margin is not None:
        search["noiseMargin"] = args.noise_margin
    os.chdir(REPO)  # the manifest helper reads examples/ relative to the repository
    args.out.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster()
    cluster.start()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    operator = None
    try:
        cluster.install_crds(REPO / "crds")
        s3 = upload_example(cluster, Path(tempfile.mkdtemp(prefix="enginewright-reapplied-")), runs_bucket=BUCKET)
        operator = start_operator(
            cluster, args.out / "operator.log", BUCKET, ENGINEWRIGHT_RECONCILE_INTERVAL=RECONCILE_INTERVAL
        )
        (args.out / "runs.jsonl").write_text("")
        repetitions = [repetition(cluster, s3, i, search, args.timeout, args.out) for i in range(1, args.repeat + 1)]
    finally:
        if operator is not None:
            operator.stop()
        cluster.stop()
        cluster.remove()
    summary = summarize(repetitions)
    text = table(summary)
    (args.out / "table.md").write_text(text + "\n")
    (args.out / "summary.json").write_text(
        json.dumps(
            {
                "command": " ".join(["python", *sys.argv]),
                "started": started,
                "machine": f"{os.cpu_count()} cores",
                "knobs": KNOBS,
                "routes_per_job": ROUTES_PER_JOB,
                "search_changes": search,
                "reconcile_interval_s": float(RECONCILE_INTERVAL),
                "repetitions": args.repeat,
                "figures": summary,
            },
            indent=2,
        )
        + "\n"
    )
    print(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
