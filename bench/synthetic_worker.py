"""A worker stand-in for the operator load benchmark (`bench/operator_load.py`).

It answers the operator's Jobs like `python -m enginewright.worker` does — the same batch request
model, store key layout and cache-entry writer (`Worker._write`) — but with synthetic timings instead
of compiling and measuring, so a 2,000-route run measures the operator, not a compiler. The knob
space is SYNTHETIC_KNOBS binary knobs s0, s1, ... (2**K routes in a full search). Never used by the
product; nothing it writes is a measurement.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator")]

from enginewright.api.cache import CacheEntry, Outcome, TimingStats, Versions, now_iso  # noqa: E402
from enginewright.api.routes import Route, parse_route  # noqa: E402
from enginewright.store import parse_s3_uri, store_from_env  # noqa: E402
from enginewright.store.layout import RunKeys  # noqa: E402
from enginewright.worker.batch import Worker  # noqa: E402
from enginewright.worker.context import Accuracy, WorkerContext  # noqa: E402
from enginewright.worker.job import BatchRequest, read_request  # noqa: E402

SUFFIX = ".syn"


def synthetic_ms(knobs: dict[str, str]) -> float:
    """Deterministic 'time' of a route: every third knob helps 3%, the others cost 1%, plus jitter."""
    ms = 1.0
    for name, value in knobs.items():
        if value == "1":
            ms *= 0.97 if int(name[1:]) % 3 == 0 else 1.01
    jitter = int(hashlib.sha256(json.dumps(knobs, sort_keys=True).encode()).hexdigest()[:4], 16) / 65535
    return ms * (1 + 0.002 * jitter)


def main() -> int:
    request = BatchRequest.model_validate_json(read_request(None))
    store = store_from_env(request.bucket)
    keys = RunKeys(request.prefix)
    node = os.environ.get("NODE_NAME", "")
    versions = Versions(compiler="synthetic-1.0", node=node)
    if request.mode == "probe":
        bucket, key = parse_s3_uri(request.spec.model.uri)
        model = store_from_env(bucket).get(key)
        count = int(os.environ.get("SYNTHETIC_KNOBS", "8"))
        store.put(
            keys.probe,
            json.dumps(
                {
                    "ok": True,
                    "knobs": [
                        {"name": f"s{i}", "values": ["0", "1"], "default": "0", "help": ""} for i in range(count)
                    ],
                    "versions": versions.wire(),
                    "model_sha256": hashlib.sha256(model).hexdigest(),
                    "model_size": len(model),
                    "input_shapes": {},
                    "engine_suffix": SUFFIX,
                    "data_sha256": {},
                }
            ).encode(),
        )
        return 0
    workdir = Path(tempfile.mkdtemp())
    worker = Worker(
        WorkerContext(
            backend="synthetic",
            model=workdir,
            accuracy=Accuracy([], []),
            store=store,
            prefix=request.prefix,
            target=request.target,
            workdir=workdir,
            engine_suffix=SUFFIX,
        )
    )
    done = worker.existing()
    default = Route.of(parse_route(request.default_route))
    baseline = synthetic_ms(default.as_dict)
    for text in [request.default_route, *request.routes]:
        route = Route.of(parse_route(text))
        if route.id in done:
            continue
        engine = f"synthetic engine {route.id}".encode()
        store.put(keys.engine(route.id, SUFFIX), engine)
        ms = synthetic_ms(route.as_dict)
        worker._write(
            CacheEntry(
                target=request.target,
                route_id=route.id,
                route=route.canonical,
                knobs=route.as_dict,
                stage=request.stage,
                batch=request.batch,
                outcome=Outcome.ok,
                timing=TimingStats(median_ms=ms, mean_ms=ms, p90_ms=ms, min_ms=ms, n=100),
                baseline_ms=baseline,
                build_seconds=0.0,
                loss={"out": 0.0},
                engine_sha256=hashlib.sha256(engine).hexdigest(),
                engine_size=len(engine),
                engine_uri=store.uri(keys.engine(route.id, SUFFIX)),
                versions=versions,
                started_at=now_iso(),
                finished_at=now_iso(),
            )
        )
        done[route.id] = True
    return 0


if __name__ == "__main__":
    sys.exit(main())
