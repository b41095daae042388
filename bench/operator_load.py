"""Operator under load, on the real local control plane + S3 store (no GPU): many TuningRuns at once,
and one run with thousands of routes in its cache.

    python bench/operator_load.py --runs 10,50 --routes 256,2048 --out docs/operator-load.json

Phase `runs`: N TuningRuns of the example model (ONNX Runtime, real workers run by the node agent,
fast search of 3 routes each, no confirmation round) applied at once. Phase `routes`: one full search
over a synthetic knob space of R routes; its Jobs run `bench/synthetic_worker.py`, which writes cache
entries through the worker's own entry writer with synthetic timings (so the phase measures the
operator, not a compiler). Each phase gets a fresh operator process; the report has, per phase:
wall time to all Ready, operator peak RSS and CPU seconds, reconcile latency p50/p99 (from its
Prometheus histogram), API requests per run (the API server's audit log, by the operator's user
agents), time from the last cache entry to the status counting it, and the largest cache shard.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "examples"), str(REPO / "operator")]

from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY, LocalCluster  # noqa: E402
from tests.cluster.operator_process import create_store_secret, start_operator, upload_example  # noqa: E402

BUCKET = "enginewright"


def kubectl_json(cluster, *args: str) -> dict:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def quantiles(metrics: str, name: str, qs=(0.5, 0.99)) -> dict[str, float | None]:
    """Quantiles from a Prometheus histogram's cumulative buckets (linear inside a bucket)."""
    buckets = []
    for line in metrics.splitlines():
        if line.startswith(f"{name}_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((math.inf if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    total = buckets[-1][1] if buckets else 0
    out = {}
    for q in qs:
        if not total:
            out[f"p{round(q * 100)}"] = None
            continue
        rank, lower, below = q * total, 0.0, 0.0
        for upper, count in buckets:
            if count >= rank:
                upper = lower * 2 if math.isinf(upper) else upper
                out[f"p{round(q * 100)}"] = lower + (upper - lower) * ((rank - below) / max(count - below, 1e-9))
                break
            lower, below = upper, count
    out["passes"] = total
    return out


def operator_requests(cluster, since: float, until: float) -> int:
    count = 0
    for event in cluster.audit_events():
        agent = event.get("userAgent", "")
        when = datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()
        if since <= when <= until and (agent.startswith("enginewright-operator") or agent.startswith("kopf")):
            count += 1
    return count


def run_manifest(name: str, namespace: str) -> dict:
    import yaml

    doc = yaml.safe_load((REPO / "examples/tuningrun-onnx-fast.yaml").read_text())
    doc["metadata"] = {"name": name, "namespace": namespace}
    spec = doc["spec"]
    spec["search"]["knobs"] = [
        {"name": "enable_mem_pattern", "values": ["0"]},
        {"name": "enable_cpu_mem_arena", "values": ["0"]},
    ]
    spec["search"]["confirm"] = {"topK": 0, "rounds": 2}
    spec["timing"] = {"warmupIterations": 2, "roundSeconds": 0.005, "minRounds": 2, "maxRounds": 3}
    return doc


def synthetic_manifest(name: str, namespace: str, routes: int) -> dict:
    doc = run_manifest(name, namespace)
    spec = doc["spec"]
    spec["search"] = {
        "mode": "full",
        "maxRoutes": routes,
        "routesPerJob": 128,
        "parallelism": 4,
        "confirm": {"topK": 0, "rounds": 2},
    }
    spec["accuracy"] = {"disabled": True, "reason": "synthetic load benchmark: nothing is measured"}
    return doc


def phase(cluster, label: str, docs: list[dict], namespace: str, logdir: Path, timeout: float, **env) -> dict:
    cluster.kubectl("create", "namespace", namespace)
    create_store_secret(cluster, namespace)
    operator = start_operator(cluster, logdir / f"operator-{label}.log", BUCKET, **env)
    cpu0 = cpu_seconds(operator.process.pid)
    began = time.time()
    cluster.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs))
    counted_at: dict[str, float] = {}
    statuses: dict[str, dict] = {}
    while time.time() - began < timeout:
        items = kubectl_json(cluster, "trun", "-n", namespace)["items"]
        for item in items:
            status = item.get("status") or {}
            statuses[item["metadata"]["name"]] = status
            targets = status.get("targets") or []
            if targets and all(
                t.get("planned") and t["done"] + t["failed"] + t["rejected"] >= t["planned"] for t in targets
            ):
                counted_at.setdefault(item["metadata"]["name"], time.time())
        finished = [s for s in statuses.values() if s.get("phase") in ("Succeeded", "Failed")]
        if len(finished) == len(docs):
            break
        time.sleep(0.5)
    wall = time.time() - began
    metrics = operator.metrics()
    result = {
        "phase": label,
        "runs": len(docs),
        "wall_s": round(wall, 1),
        "succeeded": sum(s.get("phase") == "Succeeded" for s in statuses.values()),
        "routes": sum(t.get("planned", 0) for s in statuses.values() for t in s.get("targets") or []),
        "operator_peak_rss_mib": round(operator.peak_rss_mib(), 1),
        "operator_cpu_s": round(cpu_seconds(operator.process.pid) - cpu0, 1),
        "reconcile_s": {
            k: (round(v, 4) if isinstance(v, float) else v)
            for k, v in quantiles(metrics, "enginewright_reconcile_seconds").items()
        },
        "jobs": len(kubectl_json(cluster, "jobs", "-n", namespace)["items"]),
        "failures": sorted({s.get("message", "")[:300] for s in statuses.values() if s.get("phase") != "Succeeded"}),
    }
    operator.stop()
    result["api_requests_per_run"] = round(operator_requests(cluster, began, time.time()) / len(docs), 1)
    from minio import Minio

    s3 = Minio(cluster.s3_endpoint, access_key=S3_ACCESS_KEY, secret_key=S3_SECRET_KEY, secure=False)
    lags = []
    for name, when in counted_at.items():
        prefix = f"runs/{namespace}/{name}-"
        last = max(
            (
                o.last_modified.timestamp()
                for o in s3.list_objects(BUCKET, prefix=prefix, recursive=True)
                if "/entries/" in o.object_name
            ),
            default=None,
        )
        if last:
            lags.append(when - last)
    result["last_entry_to_status_s"] = {
        "median": round(sorted(lags)[len(lags) // 2], 2) if lags else None,
        "max": round(max(lags), 2) if lags else None,
        "note": "S3 LastModified has 1 s resolution; status polled every 0.5 s",
    }
    shards = [
        cm
        for cm in kubectl_json(cluster, "configmaps", "-n", namespace)["items"]
        if (cm["metadata"].get("labels") or {}).get("tuning.enginewright.io/component") == "cache"
    ]
    sizes = [sum(len(k.encode()) + len(v.encode()) for k, v in (cm.get("data") or {}).items()) for cm in shards]
    result["cache_shards"] = len(shards)
    result["largest_shard_bytes"] = max(sizes, default=0)
    print(json.dumps(result), flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="10,50", help="comma-separated counts of concurrent runs")
    parser.add_argument("--routes", default="256,2048", help="comma-separated route counts (powers of 2)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    cluster = LocalCluster(audit_everything=True)
    cluster.start()
    results = {
        "machine": f"{os.cpu_count()} cores",
        "started": datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]),
        "phases": [],
    }
    try:
        cluster.install_crds(REPO / "crds")
        upload_example(cluster, Path(tempfile.mkdtemp(prefix="enginewright-load-")), runs_bucket=BUCKET)
        logdir = cluster.workdir / "logs"
        for count in [int(c) for c in args.runs.split(",") if c]:
            namespace = f"load-runs-{count}"
            docs = [run_manifest(f"run-{i:03d}", namespace) for i in range(count)]
            results["phases"].append(phase(cluster, f"runs-{count}", docs, namespace, logdir, args.timeout))
            args.out.write_text(json.dumps(results, indent=2))
        worker = f"{sys.executable} {REPO / 'bench/synthetic_worker.py'}"
        for routes in [int(r) for r in args.routes.split(",") if r]:
            namespace = f"load-routes-{routes}"
            knobs = int(math.log2(routes))
            results["phases"].append(
                phase(
                    cluster,
                    f"routes-{routes}",
                    [synthetic_manifest("big", namespace, routes)],
                    namespace,
                    logdir,
                    args.timeout,
                    ENGINEWRIGHT_WORKER_COMMAND=worker,
                    ENGINEWRIGHT_WORKER_ENV=json.dumps({"SYNTHETIC_KNOBS": str(knobs)}),
                )
            )
            args.out.write_text(json.dumps(results, indent=2))
    finally:
        cluster.stop()
        cluster.remove()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
