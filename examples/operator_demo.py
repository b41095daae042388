"""The operator demo: a real local control plane + S3 store + node agent (two node types standing in
for two GPU types), the operator as a process of its own, and `examples/tuningrun-demo.yaml` applied
with kubectl; live progress, then each target's winner, speedup and catalog location, and what the
operator cost.

    python examples/operator_demo.py [--keep] [--images]    (`make demo [KEEP=1] [IMAGES=1]` runs it)

--keep: at the end the demo stays in the foreground with the cluster, the store and the operator
running (it prints the exports to reach them) until Ctrl-C or SIGTERM, then stops them all and removes
the work directory; without it, everything stops when the run is done. --images runs every pod from
the built images (`make images`), not host processes.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "examples")]

from tests.cluster.harness import LocalCluster  # noqa: E402
from tests.cluster.operator_process import create_store_secret, start_operator, upload_example  # noqa: E402

NAMESPACE, RUN = "demo", "demo-mlp"


def kubectl_json(cluster, *args: str) -> dict:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def stamp(text: str | None) -> float | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None


def worker_chain_seconds(jobs: list[dict]) -> float:
    """The longest chain of worker time: per target, its Jobs' run times added up (they run one at a
    time per target with parallelism 1); the longest target's sum."""
    chains: dict[str, float] = {}
    for job in jobs:
        status = job.get("status") or {}
        start, end = stamp(status.get("startTime")), stamp(status.get("completionTime"))
        if start and end:
            target = job["metadata"]["labels"]["tuning.enginewright.io/target"]
            chains[target] = chains.get(target, 0.0) + (end - start)
    return max(chains.values(), default=0.0)


def catalog_site(cluster) -> str:
    """Where the catalog site is: the pages the operator wrote into the store, and a copy of them in
    out/catalog-site/ that outlives the demo's store (written by `enginewright catalog site`'s code)."""
    from minio import Minio

    from enginewright.catalog.reader import Catalog
    from enginewright.catalog.site import write_site
    from enginewright.store.layout import site_page
    from enginewright.store.objects import S3Store
    from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY
    s3 = Minio(cluster.s3_endpoint, access_key=S3_ACCESS_KEY, secret_key=S3_SECRET_KEY, secure=False)
    catalog = Catalog(S3Store(s3, "enginewright"))
    out = REPO / "out" / "catalog-site"
    started = time.monotonic()
    written = write_site(catalog, out)
    size = sum(p.stat().st_size for p in written)
    return (f"\n[demo] catalog site (written by the operator after each publish): "
            f"{catalog.uri(catalog.key(site_page()))}\n[demo] a copy ({len(written)} pages, {size / 1024:.0f} KiB, "
            f"{time.monotonic() - started:.2f}s): {(out / site_page(RUN)).as_uri()}  (index: "
            f"{(out / site_page()).as_uri()})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true",
                        help="at the end, keep the cluster, store and operator running until Ctrl-C (or SIGTERM), "
                             "then stop them")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--images", action="store_true",
                        help="run the pods from the built images (make images) instead of host processes")
    args = parser.parse_args()

    print("[demo] starting the local control plane, S3 store and node agent (binaries cached under "
          "~/.cache/enginewright; a cold machine builds them first, ~13 min on 2 cores)", flush=True)
    worker_env = {}
    if args.images:
        from tests.cluster.image_cluster import ImageCluster, require_images
        cluster = ImageCluster(images=require_images().layout)
        worker_env = {"ENGINEWRIGHT_WORKER_COMMAND": "python -m enginewright.worker"}  # the image's Python
        print(f"[demo] pods run from the images in {cluster.images}", flush=True)
    else:
        cluster = LocalCluster()
    cluster.start()
    print(f"[demo] cluster up in {cluster.timings['up_seconds']:.1f}s; nodes: "
          + ", ".join(f"{n['name']} ({n['labels']['nvidia.com/gpu.product']})" for n in cluster.nodes), flush=True)
    operator = None
    try:
        cluster.install_crds(REPO / "crds")
        upload_example(cluster, Path(tempfile.mkdtemp(prefix="enginewright-demo-")))
        cluster.kubectl("create", "namespace", NAMESPACE)
        create_store_secret(cluster, NAMESPACE)
        operator = start_operator(cluster, cluster.workdir / "logs" / "operator.log", **worker_env)
        print(f"[demo] operator running (log: {operator.log}); applying examples/tuningrun-demo.yaml", flush=True)
        applied = time.time()
        cluster.kubectl("apply", "-n", NAMESPACE, "-f", str(REPO / "examples/tuningrun-demo.yaml"))
        first_job, last_line, status = None, "", {}
        while time.time() - applied < args.timeout:
            run = kubectl_json(cluster, "trun", RUN, "-n", NAMESPACE)
            status = run.get("status") or {}
            if first_job is None and kubectl_json(cluster, "jobs", "-n", NAMESPACE)["items"]:
                first_job = time.time() - applied
            line = f"{status.get('phase', 'Pending'):<10} progress {status.get('progress') or '-':<7} " + "  ".join(
                f"{t['gpuType']}: {t['stage']}" + (f" ({t['done']}/{t['planned']})" if t.get("planned") else "")
                for t in status.get("targets") or [])
            if line != last_line:
                print(f"[{time.time() - applied:6.1f}s] {line}", flush=True)
                last_line = line
            conditions = {c["type"]: c for c in status.get("conditions") or []}
            if conditions.get("Ready", {}).get("status") == "True" or conditions.get("Stalled", {}).get("status") == "True":
                break
            time.sleep(0.5)
        wall = time.time() - applied
        jobs = kubectl_json(cluster, "jobs", "-n", NAMESPACE)["items"]
        chain = worker_chain_seconds(jobs)
        print()
        for target in status.get("targets") or []:
            print(f"{target['gpuType']}: {target.get('message')}")
            if target.get("speedup"):
                print(f"    {target['speedup']}")  # e.g. "gpuTime speedup 1.283x (how it was measured; winner ...)"
            if target.get("engineUri"):
                print(f"    engine  {target['engineUri']}\n    sha256  {target.get('engineSha256')}")
        if any(t.get("engineUri") for t in status.get("targets") or []):
            print(catalog_site(cluster))
        shards = [kubectl_json(cluster, "configmap", name, "-n", NAMESPACE) for t in status.get("targets") or []
                  for name in t.get("cacheConfigMaps") or []]
        largest = max((sum(len(k.encode()) + len(v.encode()) for k, v in (m.get("data") or {}).items())
                       for m in shards), default=0)
        print()
        print(f"[demo] {'Ready' if status.get('phase') == 'Succeeded' else status.get('phase')} in {wall:.1f}s; "
              f"first Job {first_job if first_job is None else round(first_job, 1)}s after apply; {len(jobs)} Jobs")
        if chain:  # Job start/completion times have 1 s resolution: so has the overhead
            print(f"[demo] operator overhead (wall - longest chain of worker Job time) / wall = "
                  f"({wall:.1f} - {chain:.0f}) / {wall:.1f} = {(wall - chain) / wall:.1%} "
                  f"(Job times have 1 s resolution, so ±{len(jobs) / wall:.0%})")
        print(f"[demo] operator peak RSS {operator.peak_rss_mib():.0f} MiB; largest cache shard {largest} bytes")
        print(f"[demo] kubectl get trun -n {NAMESPACE}:\n" + cluster.kubectl("get", "trun", "-n", NAMESPACE).stdout)
        outcome = 0 if status.get("phase") == "Succeeded" else 1
        if args.keep:
            keep_running(cluster, operator)
        return outcome
    finally:
        if operator:
            operator.stop()
        cluster.stop()
        cluster.remove()


def keep_running(cluster, operator) -> None:
    """--keep: hold the cluster and the operator (whose processes end with this one) until Ctrl-C or
    SIGTERM, or until the operator exits."""
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    env = cluster.env
    print(f"[demo] kept running: the cluster, the store and the operator (pid {operator.process.pid}, "
          f"log {operator.log}); in another shell:")
    for key in ("KUBECONFIG", "ENGINEWRIGHT_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        print(f"export {key}={env[key]}")
    print(f"export PATH={cluster.binaries}:$PATH")
    print("[demo] Ctrl-C (or SIGTERM) stops them all and removes the work directory", flush=True)
    while not stopping.wait(1):
        if operator.process.poll() is not None:
            print(f"[demo] the operator exited ({operator.process.returncode}); stopping", flush=True)
            return
    print("[demo] stopping", flush=True)


if __name__ == "__main__":
    sys.exit(main())
