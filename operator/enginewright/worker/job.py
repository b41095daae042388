"""The tuning Job's entrypoint: one batch of routes for one target, one confirmation round, or a
probe, against the object store.

    python -m enginewright.worker --batch FILE.json
    (or the store object $ENGINEWRIGHT_BATCH_URI, whose sha256 is $ENGINEWRIGHT_BATCH_SHA256: what the
    operator's Jobs pass; or the JSON itself in $ENGINEWRIGHT_BATCH, for small requests by hand)

The worker has no Kubernetes credentials and needs none: it reads the model and the reference data
from the object store, writes one cache entry per route there as soon as it is known, and keeps the
engines that may win. Object-store access comes from the environment (set from a Secret):
ENGINEWRIGHT_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ENGINEWRIGHT_S3_SECURE.

Exit codes: 0 done (route failures are results, not errors); 2 bad input (missing object, digest
mismatch, corrupt model, inputs that do not fit the model), with the reason on stderr and in
/dev/termination-log so `kubectl describe pod` shows it; 1 anything else.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import signal
import sys
import tempfile
from pathlib import Path

from pydantic import ValidationError

from enginewright.api.contracts import BatchRequest, ConfirmationResult, KnobInfo, ProbeResult
from enginewright.api.routes import Route, parse_route

log = logging.getLogger("enginewright.worker")


class InputError(Exception):
    """The Job's inputs are unusable; retrying cannot help."""


def fetch(uri: str, dest: Path) -> Path:
    """Download an s3:// object to `dest`, naming the object when it is missing."""
    from enginewright.store import parse_s3_uri, store_from_env
    from enginewright.store.objects import MissingObject

    bucket, key = parse_s3_uri(uri)
    try:
        data = store_from_env(bucket).get(key)
    except MissingObject as exc:
        raise InputError(f"{exc}: check spec.model.uri / spec.accuracy.pairs") from None
    dest.write_bytes(data)
    return dest


def prepare_inputs(request: BatchRequest, workdir: Path):
    """Download the model and the reference pairs once; verify the digest, and that the inputs and
    references fit the model's signature (`worker.reference_data`)."""
    from enginewright.backends import get_backend
    from enginewright.worker.context import Accuracy
    from enginewright.worker.reference_data import check_pairs

    spec = request.spec
    suffix = ".onnx" if spec.model.format.value == "onnx" else ".pt2"
    model = fetch(spec.model.uri, workdir / f"model{suffix}")
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    if spec.model.sha256 and digest != spec.model.sha256:
        raise InputError(
            f"model {spec.model.uri} has sha256 {digest}, but spec.model.sha256 pins "
            f"{spec.model.sha256}: the object changed, or the pin is wrong"
        )
    inputs, references = [], []
    for i, pair in enumerate(spec.accuracy.pairs):
        inputs.append(fetch(pair.inputs, workdir / f"inputs-{i}.npz"))
        references.append(fetch(pair.references, workdir / f"references-{i}.npz"))
    backend = get_backend(spec.compiler.name.value)
    try:
        signature = backend.signature(model, spec.compiler.settings)  # (onnxruntime: a session of it)
    except Exception as exc:  # the parser's own error for a corrupt model
        raise InputError(f"{spec.model.uri} is not a valid {spec.model.format.value} model: {exc}") from None
    accuracy = spec.accuracy
    if signature is not None:
        labels = [
            (
                f"spec.accuracy.pairs[{i}].inputs ({pair.inputs})",
                f"spec.accuracy.pairs[{i}].references ({pair.references})",
            )
            for i, pair in enumerate(spec.accuracy.pairs)
        ]
        found = check_pairs(signature, inputs, None if accuracy.disabled else references, labels, accuracy.outputs)
        if found:
            raise InputError(f"{spec.model.uri}: the reference data does not fit the model: {found}")
    return (
        backend,
        model,
        Accuracy(
            inputs,
            [] if accuracy.disabled else references,
            accuracy.metric.value,
            None if accuracy.disabled else accuracy.threshold,
            accuracy.atol,
            accuracy.rtol,
            list(accuracy.outputs),
        ),
    )


def probe(request: BatchRequest, workdir: Path) -> int:
    """Check the inputs as a sweep would, then write what the controller plans from: the compiler's
    knobs, its versions on this node, the model's digest and the input shapes. Bad inputs are
    written there too (`ok: false`), so the controller can say why without reading pod logs."""
    import numpy as np

    from enginewright.store import store_from_env
    from enginewright.store.layout import RunKeys

    store, key = store_from_env(request.bucket), RunKeys(request.prefix).probe
    try:
        backend, model, accuracy = prepare_inputs(request, workdir)
    except InputError as exc:
        store.put(key, ProbeResult(ok=False, error=str(exc)).model_dump_json(by_alias=True).encode())
        raise
    with np.load(accuracy.inputs[0], allow_pickle=False) as data:
        shapes = {name: list(data[name].shape) for name in sorted(data.files)}
    versions = backend.versions()
    if os.environ.get("NODE_NAME"):
        versions = versions.model_copy(update={"node": os.environ["NODE_NAME"]})
    from enginewright.worker.context import context_fingerprint

    fingerprint = context_fingerprint(worker_context(request, backend, model, accuracy, workdir, store), versions)
    result = ProbeResult(
        fingerprint=fingerprint,
        ok=True,
        knobs=[KnobInfo.of(k) for k in backend.knobs()],
        versions=versions,
        model_sha256=hashlib.sha256(model.read_bytes()).hexdigest(),
        model_size=model.stat().st_size,
        input_shapes=shapes,
        engine_suffix=backend.engine_suffix,
        data_sha256={
            f"pairs[{i}].{kind}": hashlib.sha256(path.read_bytes()).hexdigest()
            for kind, paths in (("inputs", accuracy.inputs), ("references", accuracy.references))
            for i, path in enumerate(paths)
        },
    )
    store.put(key, result.model_dump_json(by_alias=True).encode())
    print(json.dumps({"probe": key, "knobs": len(result.knobs), "versions": versions.wire()}), flush=True)
    return 0


def run(request: BatchRequest, workdir: Path) -> int:
    from enginewright.store import store_from_env
    from enginewright.worker.batch import Worker

    if request.mode == "probe":
        return probe(request, workdir)
    from enginewright import failpoints

    failpoints.hit("worker-start")
    backend, model, accuracy = prepare_inputs(request, workdir)
    ctx = worker_context(request, backend, model, accuracy, workdir, store_from_env(request.bucket))
    ctx.fingerprint = _probed_fingerprint(ctx)  # stamped on every entry (the measuring process's versions)
    routes = [Route.of(parse_route(r)) for r in request.routes]
    default = Route.of(parse_route(request.default_route))
    if request.mode == "confirm":
        return confirm_round(Worker(ctx), routes, default, request)
    written = Worker(ctx).run_batch(routes, request.stage, request.batch, default)
    print(
        json.dumps(
            {
                "batch": request.batch,
                "written": len(written),
                "outcomes": {e.route_id: e.outcome.value for e in written},
            }
        ),
        flush=True,
    )
    return 0


def worker_context(request: BatchRequest, backend, model: Path, accuracy, workdir: Path, store):
    """The worker's context for a Job's request (sweep, confirm, and the probe's fingerprint): the
    request's spec where the request says (`WorkerContext.of`, as `tune` does)."""
    from enginewright.worker.context import WorkerContext

    return WorkerContext.of(
        request.spec,
        model=model,
        accuracy=accuracy,
        store=store,
        prefix=request.prefix,
        target=request.target,
        workdir=workdir,
        engine_suffix=backend.engine_suffix,
        deadline=request.deadline,
        progress=lambda message: print(message, flush=True),
    )


def _probed_fingerprint(ctx):
    """The fingerprint the target's probe wrote (not computed from the backend's versions here: that
    would initialise CUDA in the process that spawns the measuring ones); None without a probe."""
    try:
        return ProbeResult.model_validate_json(ctx.store.get(ctx.keys.probe)).fingerprint
    except Exception:  # noqa: BLE001  (a missing object: the store's own error type)
        return None


def confirm_round(worker, routes: list[Route], default: Route, request: BatchRequest) -> int:
    """Interleave the kept engines of the candidate routes with the default's and write the rounds
    to `<prefix>/confirm/<batch>.json`; the controller's flow decides from them (`search.flow`)."""
    entries = worker.existing()
    missing = [
        r.canonical or "(default)" for r in [default, *routes] if r.id not in entries or not entries[r.id].engine_uri
    ]
    if missing:
        raise InputError(f"no kept engine for {missing}: a confirmation round needs measured, kept engines")
    spec = request.spec
    rounds = worker.confirm(
        [entries[r.id] for r in routes], entries[default.id], spec.search.confirm.rounds, spec.search.confirm.loads
    )
    result = ConfirmationResult(batch=request.batch, rounds=rounds)
    worker.ctx.store.put(worker.ctx.keys.confirmation(request.batch), result.model_dump_json(by_alias=True).encode())
    timed = len(next(iter(rounds.values()), []))
    print(json.dumps({"batch": request.batch, "loads": len(rounds), "rounds": timed}), flush=True)
    return 0


def read_request(batch_file: str | None) -> str:
    """The batch request's JSON: `--batch FILE`, else the store object at $ENGINEWRIGHT_BATCH_URI (its
    bytes must have the sha256 in $ENGINEWRIGHT_BATCH_SHA256, the Job's own), else $ENGINEWRIGHT_BATCH."""
    if batch_file:
        return Path(batch_file).read_text()
    uri = os.environ.get("ENGINEWRIGHT_BATCH_URI")
    if not uri:
        text = os.environ.get("ENGINEWRIGHT_BATCH", "")
        if not text:
            raise InputError(
                "no batch request: pass --batch FILE, or set ENGINEWRIGHT_BATCH_URI (or ENGINEWRIGHT_BATCH)"
            )
        return text
    from enginewright.store import parse_s3_uri, store_from_env
    from enginewright.store.objects import MissingObject

    bucket, key = parse_s3_uri(uri)
    try:
        data = store_from_env(bucket).get(key)
    except MissingObject:
        raise InputError(f"the batch request {uri} is not in the store") from None
    expected = os.environ.get("ENGINEWRIGHT_BATCH_SHA256")
    if expected and hashlib.sha256(data).hexdigest() != expected:
        raise InputError(
            f"the batch request {uri} has sha256 {hashlib.sha256(data).hexdigest()}, not this Job's "
            f"{expected}: it was replaced after the Job was made"
        )
    return data.decode()


def _termination_message(message: str) -> None:
    try:
        Path("/dev/termination-log").write_text(message[:4000])
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m enginewright.worker", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--batch", help="batch request JSON file (default: $ENGINEWRIGHT_BATCH_URI, else $ENGINEWRIGHT_BATCH)"
    )
    parser.add_argument("--workdir", help="scratch directory (default: a temp dir)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    # A deleted pod gets SIGTERM: exit through the normal path, so the route's child process group
    # is killed too (`process.Builder.close`) instead of running on as an orphan.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        request = BatchRequest.model_validate_json(read_request(args.batch))
        workdir = Path(args.workdir or tempfile.mkdtemp(prefix="enginewright-job-"))
        workdir.mkdir(parents=True, exist_ok=True)
        return run(request, workdir)
    except (InputError, ValidationError) as exc:
        message = f"enginewright worker: bad input: {exc}"
        print(message, file=sys.stderr, flush=True)
        _termination_message(message)
        return 2
    except Exception as exc:
        message = f"enginewright worker: {type(exc).__name__}: {exc}"
        print(message, file=sys.stderr, flush=True)
        _termination_message(message)
        raise
