"""Issue 21, item 4: an Inductor TuningRun through the operator, end to end, on the machine it runs on.

    bash bench/gpu_e2e_bundle.sh                                   # here: out/h200e2e (< 64 MiB)
    # on the GPU machine (device call with carry ["out/h200e2e"]):
    eval "$(bash bench/gpu_e2e_unpack.sh)" && python3 bench/gpu_operator_e2e.py --out $OUT/e2e
    # on a CPU machine with the test venv (the same path, a CPU target):
    python bench/gpu_operator_e2e.py --out /tmp/e2e --device cpu --workload attention-small

What it starts, all real and on this machine: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler (tests/cluster/harness.py), the versitygw S3 store, the node agent (tests/cluster/
node_agent.py, host mode: a pod's container is a process of this machine's Python, so on the GPU
machine the worker Jobs run on its GPU) registering ONE node labelled as GPU feature discovery would
label this machine's GPU (from NVML / nvidia-smi, `enginewright.catalog.this_machine`), and the operator
(`python -m enginewright.controller`). Then:

1. exports the workload (bench/workloads.py: on CUDA fp16 weights, float32 inputs the engine casts to
   fp16 (`input_dtype`), float32 eager references; fp32 on CPU) and
   puts it in the store; applies a TuningRun: Inductor on `--device`, mixed search over `compile=false`
   (the eager route) and `triton.cudagraphs=true` (CUDA only), the product's default timing and
   confirmation, one target: this GPU's product label, one GPU a Job;
2. waits for Ready, writing the status, the Jobs and pods (with the node each ran on) to OUT as it goes;
3. `enginewright fetch --gpu auto` (or `--gpu cpu`) from the catalog into OUT/fetched;
4. serves the fetched engine in a fresh process (bench/gpu_operator_e2e.py serve): reproduces the
   references, and times it as the worker timed it (the product's rounds: `rounds.Held.round`, the
   run's objective and round length, after a primer load) and in a plain loop of CUDA-event timed
   calls; compares both with the time the run recorded for that engine (the provenance's
   `timing.timesMs` of the winner, else `winnerMs`);
5. in the same process, the issue's plain loop of the same two routes: `torch.compile` of the exported
   program with the default's options and with the winner's (`route.knobs`), 200 calls x 7 each,
   taking turns, CUDA events; their ratio (the median of the 7 default/winner pairs) against the
   headline's 95% interval (`timing.speedupInterval`): `plain_ratio_in_interval`.

OUT/e2e.json holds every figure, OUT/logs the components' logs, OUT/*.json the run's objects;
the cluster, store and engines stay in --workdir. Exit 0 only when the run reached
Ready, the engine was fetched, and it reproduced the references.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator"), str(REPO / "bench")]

NAMESPACE = "e2e"
RUNS_BUCKET, MODELS_BUCKET = "enginewright", "enginewright-models"


def say(began: float, message: str) -> None:
    print(f"[{time.monotonic() - began:6.1f}s] {message}", flush=True)


def node_for(device: str) -> tuple[dict, str]:
    """The one node to register (labels as GPU feature discovery would set them) and the target's gpuType."""
    if device != "cuda":
        return {"name": "cpu-0", "labels": {"nvidia.com/gpu.product": "cpu"}, "gpus": 0}, "cpu"
    from enginewright.catalog.this_machine import local_gpu

    gpu = local_gpu()
    labels = {"nvidia.com/gpu.product": gpu.product}
    if gpu.compute_capability:
        major, _, minor = gpu.compute_capability.partition(".")
        labels |= {"nvidia.com/gpu.compute.major": major, "nvidia.com/gpu.compute.minor": minor or "0"}
    if gpu.driver:
        labels["nvidia.com/cuda.driver.major"] = gpu.driver.split(".")[0]
    return {"name": f"{gpu.product.lower()}-0", "labels": labels, "gpus": 1}, gpu.product


def tuning_run(name: str, device: str, gpu_type: str, program: str, pairs: int) -> dict:
    knobs = [{"name": "compile", "values": ["false"]}]
    if device == "cuda":
        knobs.append({"name": "triton.cudagraphs", "values": ["true"]})
    return {
        "apiVersion": "tuning.enginewright.io/v1alpha1",
        "kind": "TuningRun",
        "metadata": {"name": name},
        "spec": {
            "model": {"uri": f"s3://{MODELS_BUCKET}/e2e/{program}", "format": "torch-export"},
            "compiler": {
                "name": "inductor",
                "settings": {"device": device, **({"input_dtype": "float16"} if device == "cuda" else {})},
            },
            "search": {"mode": "mixed", "knobs": knobs},
            "accuracy": {
                "metric": "cosine",
                "threshold": 1e-3,
                "pairs": [
                    {
                        "inputs": f"s3://{MODELS_BUCKET}/e2e/inputs-{i}.npz",
                        "references": f"s3://{MODELS_BUCKET}/e2e/references-{i}.npz",
                    }
                    for i in range(pairs)
                ],
            },
            "publish": {"modelName": name},
            "targets": [{"gpuType": gpu_type, "gpusPerJob": 1 if device == "cuda" else 0}],
        },
    }


def main() -> int:
    if sys.argv[1:2] == ["serve"]:
        return serve(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workload", default="attention")
    parser.add_argument("--timeout", type=float, default=420.0, help="seconds to wait for Ready")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/e2e-work"),
        help="the cluster, store, model and fetched engine (OUT gets the figures and logs)",
    )
    args = parser.parse_args()
    from minio import Minio

    from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY, LocalCluster, wait_for
    from tests.cluster.operator_process import create_store_secret, start_operator
    from workloads import WORKLOADS, prepare

    began = time.monotonic()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"device": args.device, "workload": args.workload, "steps": {}}

    def record(step: str, **facts) -> None:
        result["steps"][step] = {"at_s": round(time.monotonic() - began, 1), **facts}
        (out / "e2e.json").write_text(json.dumps(result, indent=1))
        say(began, f"{step}: {json.dumps(facts)[:300]}")

    node, gpu_type = node_for(args.device)
    record("node", node=node)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(workdir=work / "cluster", nodes=[node])
    cluster.start()
    operator = None
    try:
        record("cluster", up_s=round(cluster.timings["up_seconds"], 1))
        cluster.install_crds(REPO / "crds")
        cluster.kubectl("create", "namespace", NAMESPACE)
        create_store_secret(cluster, NAMESPACE)
        workload = next(w for w in WORKLOADS if w.name == args.workload)
        # as bench/workloads.setup: fp16 weights (and inputs cast to fp16 by the engine) on CUDA, fp32 on CPU
        files = prepare(workload, work / "model", args.device, dtype="float16" if args.device == "cuda" else "float32")
        s3 = Minio(cluster.s3_endpoint, access_key=S3_ACCESS_KEY, secret_key=S3_SECRET_KEY, secure=False)
        for bucket in (MODELS_BUCKET, RUNS_BUCKET):
            s3.make_bucket(bucket)
        for path in [files["program"], *files["inputs"], *files["references"]]:
            s3.fput_object(MODELS_BUCKET, f"e2e/{path.name}", str(path))
        record("model", workload=workload.note, program=files["program"].name)

        # worker pods run this checkout with this Python, and the packages this process found (on the GPU
        # machine: the unpacked bundle's, which its Python lacks)
        path = os.pathsep.join([str(REPO / "operator"), os.environ.get("PYTHONPATH", "")])
        operator = start_operator(
            cluster,
            out / "logs" / "operator.log",
            RUNS_BUCKET,
            ENGINEWRIGHT_NAMESPACES=NAMESPACE,
            ENGINEWRIGHT_WORKER_COMMAND=f"env PYTHONPATH={path} {sys.executable} -m enginewright.worker",
        )
        run = f"e2e-{args.workload}"
        manifest = tuning_run(run, args.device, gpu_type, files["program"].name, len(files["inputs"]))
        cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(manifest))
        record("applied", manifest=manifest["spec"])

        seen: dict = {}

        def ready():
            status = (
                json.loads(cluster.kubectl("get", "tuningrun", run, "-n", NAMESPACE, "-o", "json").stdout).get("status")
                or {}
            )
            brief = {
                "phase": status.get("phase"),
                "targets": [(t.get("gpuType"), t.get("stage"), t.get("message")) for t in status.get("targets", [])],
            }
            if brief != seen.get("brief"):
                seen["brief"] = brief
                record("progress", **brief)
            conditions = {c["type"]: c for c in status.get("conditions", [])}
            if conditions.get("Stalled", {}).get("status") == "True" or status.get("phase") == "Failed":
                raise RuntimeError(f"the run ended {status.get('phase')}: {conditions}")
            return status if conditions.get("Ready", {}).get("status") == "True" else None

        try:
            status = wait_for(ready, args.timeout, f"TuningRun {run} Ready", interval=2)
        finally:
            for kind in ("jobs", "pods", "events"):
                got = cluster.kubectl("get", kind, "-n", NAMESPACE, "-o", "json", check=False)
                (out / f"{kind}.json").write_text(got.stdout)
            got = cluster.kubectl("get", "tuningrun", run, "-n", NAMESPACE, "-o", "json", check=False)
            (out / "tuningrun.json").write_text(got.stdout)
        pods = json.loads((out / "pods.json").read_text())["items"]
        (target,) = status["targets"]
        record(
            "ready",
            phase=status["phase"],
            winner=target.get("winner"),
            speedup=target.get("speedup"),
            engine=target.get("engineUri"),
            sha256=target.get("engineSha256"),
            pods=[
                (
                    p["metadata"]["labels"].get("tuning.enginewright.io/stage"),
                    p["spec"].get("nodeName"),
                    p["status"].get("phase"),
                )
                for p in pods
            ],
        )

        dest = work / "fetched"
        gpu_flag = "auto" if args.device == "cuda" else "cpu"
        fetched = subprocess.run(
            [
                sys.executable,
                "-m",
                "enginewright",
                "fetch",
                "--catalog",
                f"s3://{RUNS_BUCKET}",
                "--model",
                run,
                "--gpu",
                gpu_flag,
                "--dest",
                str(dest),
            ],
            env={**cluster.env, "PYTHONPATH": os.pathsep.join(sys.path[:3] + [os.environ.get("PYTHONPATH", "")])},
            capture_output=True,
            text=True,
            timeout=300,
        )
        record("fetched", rc=fetched.returncode, stdout=fetched.stdout.strip(), stderr=fetched.stderr.strip()[-2000:])
        if fetched.returncode != 0:
            return 1
        (out / "provenance.json").write_text((dest / "provenance.json").read_text())
    finally:
        if operator is not None:
            operator.stop()
        cluster.stop()
        logs = out / "logs"
        logs.mkdir(exist_ok=True)
        for log in (work / "cluster" / "logs").glob("*.log"):
            (logs / log.name).write_text(log.read_text(errors="replace")[-200_000:])
    served = subprocess.run(
        [sys.executable, __file__, "serve", str(dest), str(work / "model"), args.device],
        capture_output=True,
        text=True,
        timeout=300,
    )
    (out / "serve.log").write_text(served.stdout + served.stderr)
    if served.returncode != 0:
        record("served", rc=served.returncode, tail=(served.stdout + served.stderr)[-2000:])
        return 1
    figures = json.loads(served.stdout.strip().splitlines()[-1])
    record("served", **figures)
    return 0 if figures["accuracy_ok"] else 1


def serve(argv: list[str]) -> int:
    """In a fresh process, as a consumer: load the fetched engine, check it, time it two ways."""
    import numpy as np
    import torch

    from enginewright.accuracy.metrics import loss
    from enginewright.api.contracts import Provenance
    from enginewright.backends import get_backend
    from enginewright.measure.rounds import Held
    from enginewright.measure.timing import calls_per_round, warm_up

    dest, model, device = Path(argv[0]), Path(argv[1]), argv[2]
    provenance = Provenance.model_validate_json((dest / "provenance.json").read_text())
    (engine_file,) = [p for p in dest.iterdir() if p.name.startswith("engine")]
    engine = engine_file.read_bytes()
    backend = get_backend("inductor")
    timing = provenance.timing
    recorded = (timing.times_ms or {}).get(provenance.route.id) or timing.winner_ms
    inputs = [dict(np.load(p)) for p in sorted(model.glob("inputs-*.npz"))]
    references = [dict(np.load(p)) for p in sorted(model.glob("references-*.npz"))]
    primer = backend.load(engine, dest / "load-primer")  # the worker never times a process's first load
    primer.run(inputs[0])
    runner = backend.load(engine, dest / "load")
    worst = max(
        loss(runner.run(x)[name], ref[name], provenance.accuracy.metric)
        for x, ref in zip(inputs, references)
        for name in ref
    )
    objective = timing.objective
    round_seconds = 0.05
    warm_up(runner, inputs[0], objective, 10)
    held = Held(runner, calls_per_round(runner, inputs[0], objective, round_seconds), "fetched")
    product_rounds = [held.round(objective, inputs[0], round_seconds) for _ in range(20)]
    plain = []
    if device == "cuda":
        prepared = runner.prepare(inputs[0])  # as a server holds its inputs on the GPU
        for _ in range(7):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(200):
                runner.run_prepared(prepared)
            end.record()
            torch.cuda.synchronize()
            plain.append(start.elapsed_time(end) / 200)
    product_ms = statistics.median(product_rounds)
    compared = plain_loop_ratio(torch, model, provenance, inputs[0], device)
    figures = {
        "accuracy_worst": worst,
        "accuracy_ok": bool(worst <= (provenance.accuracy.threshold or 1e-3)),
        "route": provenance.route.route,
        "objective": objective,
        "recorded_ms": recorded,
        "times_ms": timing.times_ms,
        "product_rounds_ms": product_rounds,
        "product_ms": product_ms,
        "plain_loop_ms": plain,
        "plain_ms": statistics.median(plain) if plain else None,
        "served_over_recorded": product_ms / recorded if recorded else None,
        "plain_over_recorded": statistics.median(plain) / recorded if plain and recorded else None,
        "gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        **compared,
    }
    runner.close()
    primer.close()
    print(json.dumps(figures))
    return 0


def plain_loop_ratio(
    torch, model: Path, provenance, inputs: dict, device: str, calls: int = 200, rounds: int = 7
) -> dict:
    """The default and the winner as `torch.compile` in a plain loop (the eager route: the exported
    module itself), taking turns: default/winner per turn, their median, and whether the headline's
    interval holds it. CUDA events on CUDA, the host clock on CPU."""
    (program,) = model.glob("*.pt2")
    dtype = getattr(torch, provenance.route.base_settings.get("input_dtype", "float32"))
    from torch._inductor import config

    from enginewright.backends.inductor import compiles, route_options

    knobs = provenance.route.knobs  # typed as the backend types them when it builds the route
    options = {"default": ({}, False), "winner": (route_options(config, knobs), not compiles(knobs))}
    compiled, loops = {}, {"default": [], "winner": []}
    (x,) = [torch.from_numpy(v).to(device).to(dtype) for v in inputs.values()]
    for name, (opts, as_is) in options.items():
        module = torch.export.load(str(program)).module()  # a module of its own: dynamo caches by code
        compiled[name] = module if as_is else torch.compile(module, backend="inductor", options=opts, dynamic=False)
        with torch.inference_mode():
            for _ in range(20):
                compiled[name](x)

    def timed(run) -> float:
        if device != "cuda":
            started = time.perf_counter()
            for _ in range(calls):
                run(x)
            return (time.perf_counter() - started) * 1000 / calls
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        run(x)  # queued ahead, as in a serving loop
        start.record()
        for _ in range(calls):
            run(x)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / calls

    with torch.inference_mode():
        for _ in range(rounds):
            for name in options:
                loops[name].append(timed(compiled[name]))
    ratio = statistics.median(d / w for d, w in zip(loops["default"], loops["winner"]))
    interval = provenance.timing.speedup_interval
    return {
        "plain_default_ms": loops["default"],
        "plain_winner_ms": loops["winner"],
        "plain_ratio": ratio,
        "headline": provenance.timing.speedup,
        "headline_interval": interval,
        "plain_ratio_in_interval": bool(interval and interval[0] <= ratio <= interval[1]),
    }


if __name__ == "__main__":
    sys.exit(main())
