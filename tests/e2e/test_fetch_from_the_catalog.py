"""`enginewright fetch` and `enginewright catalog list/verify` as a user runs them (the command, its
exit code, DIR afterwards) against the real S3 server, on a catalog in the operator's layout."""

import hashlib
import io
import json
import os
import subprocess
import sys
import uuid

import pytest

from enginewright.catalog.fetch import EXIT_INCOMPATIBLE, EXIT_NOT_FOUND, EXIT_TAMPERED
from enginewright.store.layout import CatalogKeys
from enginewright.store.objects import S3Store

ORT = "onnxruntime-1.32.0"  # what the test environment has installed (checked below)


def publish_entry(
    store: S3Store,
    model: str,
    gpu: str,
    version: str,
    uid: str,
    day: str,
    *,
    speedup=1.2,
    accuracy_off=False,
    namespace="ns",
) -> dict:
    """Publish one engine as the operator does: engine, provenance, report, then the index entry."""
    keys = CatalogKeys(model, gpu, version, "ab" * 32, "cd" * 6, uid)
    engine = os.urandom(2048) + uid.encode()
    sha = hashlib.sha256(engine).hexdigest()
    store.put(keys.engine(".ort.tar"), engine)
    store.put(
        keys.provenance,
        json.dumps(
            {
                "engine": {"uri": store.uri(keys.engine(".ort.tar")), "sha256": sha, "size": len(engine)},
                "model": {"sha256": "ab" * 32},
                "accuracy": {"disabled": accuracy_off, "lossPerOutput": None if accuracy_off else {"y": 1e-6}},
                "compiler": {"name": "onnxruntime", "versions": {"compiler": version}},
                "gpu": {"product": gpu},
                "run": {"uid": uid},
            }
        ).encode(),
    )
    store.put(keys.report, b"# report\n")
    try:
        index = json.loads(store.get(keys.index))
    except FileNotFoundError:
        index = {"model": model, "entries": []}
    entry = {
        "gpuProduct": gpu,
        "compilerVersion": version,
        "folder": keys.folder,
        "engine": store.uri(keys.engine(".ort.tar")),
        "sha256": sha,
        "route": "",
        "speedup": speedup,
        "confirmed": True,
        "modelSha256": "ab" * 32,
        "run": f"{namespace}/{uid}",
        "runUid": uid,
        "publishedAt": f"2026-11-{day}T00:00:00Z",
    }
    index["entries"].append(entry)
    store.put(keys.index, json.dumps(index).encode())
    return {**entry, "bytes": engine}


@pytest.fixture
def catalog(cluster, s3):
    bucket = f"catalog-{uuid.uuid4().hex[:8]}"
    s3.make_bucket(bucket)
    store = S3Store(s3, bucket)
    return bucket, store


def fetch(cluster, bucket, *args):
    """`enginewright fetch ...` or `enginewright catalog list|verify ...` with --catalog s3://bucket."""
    words = 2 if args[0] == "catalog" else 1
    return subprocess.run(
        [sys.executable, "-m", "enginewright", *args[:words], "--catalog", f"s3://{bucket}", *args[words:]],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_environment_has_the_onnxruntime_the_catalog_is_written_for():
    import onnxruntime

    assert f"onnxruntime-{onnxruntime.__version__}" == ORT


def test_fetch_picks_the_entry_for_the_gpu_and_compiler_version(cluster, catalog, tmp_path):
    bucket, store = catalog
    published = {
        (g, v): publish_entry(store, "mlp", g, v, f"{g[-4:].lower()}-{v[-6:]}", "10")
        for g in ("NVIDIA-H200", "NVIDIA-L40S")
        for v in ("onnxruntime-1.31.0", ORT)
    }
    dest = tmp_path / "engine"
    done = fetch(
        cluster,
        bucket,
        "fetch",
        "--model",
        "mlp",
        "--gpu",
        "NVIDIA-L40S",
        "--compiler-version",
        "auto",
        "--dest",
        str(dest),
    )
    assert done.returncode == 0, done.stderr
    want = published[("NVIDIA-L40S", ORT)]
    assert (dest / "engine.ort.tar").read_bytes() == want["bytes"]
    assert json.loads((dest / "provenance.json").read_text())["engine"]["sha256"] == want["sha256"]
    assert sorted(p.name for p in dest.iterdir()) == ["engine.ort.tar", "provenance.json"]
    assert not [p for p in tmp_path.iterdir() if p.name != "engine"]  # no scratch left beside DIR
    assert want["runUid"] in done.stdout

    # An explicit older ONNX Runtime gets the engine built by that minor version.
    older = tmp_path / "older"
    done = fetch(
        cluster,
        bucket,
        "fetch",
        "--model",
        "mlp",
        "--gpu",
        "NVIDIA-H200",
        "--compiler-version",
        "onnxruntime-1.31.2",
        "--dest",
        str(older),
    )
    assert done.returncode == 0, done.stderr
    assert (older / "engine.ort.tar").read_bytes() == published[("NVIDIA-H200", "onnxruntime-1.31.0")]["bytes"]

    # The coverage table shows both GPUs and both versions; --json says the same for scripts.
    listed = fetch(cluster, bucket, "catalog", "list")
    assert listed.returncode == 0, listed.stderr
    assert "model mlp: 2 GPU product(s) x 2 compiler version(s), 0 gap(s)" in listed.stdout
    data = json.loads(fetch(cluster, bucket, "catalog", "list", "--json").stdout)
    (model,) = data["models"]
    assert model["gpuProducts"] == ["NVIDIA-H200", "NVIDIA-L40S"] and len(model["cells"]) == 4


def test_a_version_or_gpu_mismatch_is_refused_with_what_was_found_and_offered(cluster, catalog, tmp_path):
    bucket, store = catalog
    publish_entry(store, "mlp", "NVIDIA-A10G", "onnxruntime-1.31.0", "a10g-old", "10")
    publish_entry(store, "mlp", "NVIDIA-H200", ORT, "h200-new", "10")
    dest = tmp_path / "engine"
    done = fetch(cluster, bucket, "fetch", "--model", "mlp", "--gpu", "NVIDIA-A10G", "--dest", str(dest))
    assert done.returncode == EXIT_INCOMPATIBLE, done.stderr
    assert f"found: GPU NVIDIA-A10G, {ORT}" in done.stderr
    assert "NVIDIA-A10G onnxruntime-1.31.0 run ns/a10g-old" in done.stderr and "same major.minor" in done.stderr
    assert "NVIDIA-H200 onnxruntime-1.32.0 run ns/h200-new" in done.stderr and "this GPU is NVIDIA-A10G" in done.stderr
    assert not dest.exists() or not list(dest.iterdir())

    missing = fetch(cluster, bucket, "fetch", "--model", "resnet", "--gpu", "NVIDIA-H200", "--dest", str(dest))
    assert missing.returncode == EXIT_NOT_FOUND and "no model 'resnet'" in missing.stderr
    unknown_run = fetch(
        cluster, bucket, "fetch", "--model", "mlp", "--gpu", "NVIDIA-H200", "--run", "nope", "--dest", str(dest)
    )
    assert unknown_run.returncode == EXIT_NOT_FOUND and "no engine from run 'nope'" in unknown_run.stderr


def test_a_tampered_engine_is_refused_and_leaves_nothing_in_dir(cluster, catalog, s3, tmp_path):
    bucket, store = catalog
    entry = publish_entry(store, "mlp", "NVIDIA-H200", ORT, "h200-run", "10")
    key = f"{entry['folder']}/engine.ort.tar"
    assert fetch(cluster, bucket, "catalog", "verify").returncode == 0
    data = bytearray(s3.get_object(bucket, key).read())
    data[100] ^= 0x01  # one bit of one byte, in the store
    s3.put_object(bucket, key, io.BytesIO(bytes(data)), len(data))

    dest = tmp_path / "engine"
    dest.mkdir()
    done = fetch(cluster, bucket, "fetch", "--model", "mlp", "--gpu", "NVIDIA-H200", "--dest", str(dest))
    assert done.returncode == EXIT_TAMPERED, done.stderr
    assert entry["sha256"] in done.stderr and hashlib.sha256(data).hexdigest() in done.stderr
    assert list(dest.iterdir()) == []  # hidden files too
    assert sorted(p.name for p in tmp_path.iterdir()) == ["engine"]

    verified = fetch(cluster, bucket, "catalog", "verify")
    assert verified.returncode == EXIT_TAMPERED
    assert verified.stdout.startswith("mismatch") and "h200-run" in verified.stdout


def test_several_runs_for_the_same_key_newest_best_pinned_validated(cluster, catalog, tmp_path):
    bucket, store = catalog
    runs = {
        uid: publish_entry(store, "mlp", "NVIDIA-H200", ORT, uid, day, speedup=speedup, accuracy_off=off)
        for uid, day, speedup, off in [
            ("run-fast", "01", 1.8, False),
            ("run-mid", "05", 1.1, False),
            ("run-new-unchecked", "09", 1.3, True),
        ]
    }

    def got(*extra):
        dest = tmp_path / uuid.uuid4().hex[:6]
        done = fetch(cluster, bucket, "fetch", "--model", "mlp", "--gpu", "NVIDIA-H200", "--dest", str(dest), *extra)
        assert done.returncode == 0, done.stderr
        body = (dest / "engine.ort.tar").read_bytes()
        return next(uid for uid, entry in runs.items() if entry["bytes"] == body)

    assert got() == "run-new-unchecked"
    assert got("--select", "speedup") == "run-fast"
    assert got("--run", "run-mid") == "run-mid"
    assert got("--require-validated") == "run-mid"
    assert got("--require-validated", "--select", "speedup") == "run-fast"
    refused = fetch(
        cluster,
        bucket,
        "fetch",
        "--model",
        "mlp",
        "--gpu",
        "NVIDIA-H200",
        "--run",
        "run-new-unchecked",
        "--require-validated",
        "--dest",
        str(tmp_path / "x"),
    )
    assert refused.returncode == EXIT_INCOMPATIBLE and "accuracy was not validated" in refused.stderr


def test_an_entry_claiming_another_model_digest_is_never_handed_out(cluster, catalog, tmp_path):
    """An index entry of model `mlp` whose engine's provenance records another model (a run that tuned
    something else under this name) is refused: fetch exits 'tampered' and writes nothing."""
    bucket, store = catalog
    entry = publish_entry(store, "mlp", "NVIDIA-H200", ORT, "other-model", "10")
    index = json.loads(store.get("catalog/mlp/index.json"))
    provenance_key = f"{entry['folder']}/provenance.json"
    provenance = json.loads(store.get(provenance_key))
    provenance["model"]["sha256"] = "ef" * 32  # the engine is of another model than the index claims
    store.put(provenance_key, json.dumps(provenance).encode())
    dest = tmp_path / "engine"
    done = fetch(cluster, bucket, "fetch", "--model", "mlp", "--gpu", "NVIDIA-H200", "--dest", str(dest))
    assert done.returncode == EXIT_TAMPERED, done.stderr
    assert "ab" * 32 in done.stderr and "ef" * 32 in done.stderr
    assert not dest.exists() or list(dest.iterdir()) == []
    verified = fetch(cluster, bucket, "catalog", "verify")
    assert verified.returncode == EXIT_TAMPERED and verified.stdout.startswith("mismatch")
    assert index["entries"][0]["modelSha256"] == "ab" * 32


def test_an_entry_from_another_namespace_than_the_owner_is_not_offered(cluster, catalog, tmp_path):
    """An owned index (the operator records the first publisher's namespace) holding a newer entry of
    another namespace (written before the operator refused it): fetch hands out the owner's engine."""
    bucket, store = catalog
    own = publish_entry(store, "demo-mlp", "NVIDIA-H200", ORT, "owners-run", "01", namespace="team-b")
    publish_entry(store, "demo-mlp", "NVIDIA-H200", ORT, "takeover", "09", namespace="team-a")
    index = json.loads(store.get("catalog/demo-mlp/index.json"))
    store.put("catalog/demo-mlp/index.json", json.dumps({**index, "owner": {"namespace": "team-b"}}).encode())
    dest = tmp_path / "engine"
    done = fetch(cluster, bucket, "fetch", "--model", "demo-mlp", "--gpu", "NVIDIA-H200", "--dest", str(dest))
    assert done.returncode == 0, done.stderr
    assert (dest / "engine.ort.tar").read_bytes() == own["bytes"]
    pinned = fetch(
        cluster,
        bucket,
        "fetch",
        "--model",
        "demo-mlp",
        "--gpu",
        "NVIDIA-H200",
        "--run",
        "takeover",
        "--dest",
        str(tmp_path / "x"),
    )
    assert pinned.returncode == EXIT_NOT_FOUND, pinned.stderr
