"""An entry per stack, on the real S3 server: the operator's writer (`catalog.writer.publish`)
publishes an engine for one GPU type on driver 535, then on driver 550; the index keeps both, the
older marked superseded for the new stack in the same index write, and `enginewright fetch` hands
each driver its own engine (`--driver-major`), falls back to another driver's saying so, or refuses
with `--same-driver`, naming what was wanted and what the catalog holds. An index written before
stacks were recorded still reads (fetch, catalog list)."""

import hashlib
import json
import os
import subprocess
import sys
import uuid

import pytest

from enginewright.api.cache import Versions
from enginewright.catalog.fetch import EXIT_INCOMPATIBLE
from enginewright.catalog.writer import publish, read_index, stack_of
from enginewright.store.layout import CatalogKeys
from enginewright.store.objects import S3Store

ORT = "onnxruntime-1.32.0"  # the test environment's (tests/e2e/test_fetch_from_the_catalog.py checks it)
GPU = "NVIDIA-H200"
MODEL_SHA = "ab" * 32


@pytest.fixture
def bucket(cluster, s3):
    name = f"stacks-{uuid.uuid4().hex[:8]}"
    s3.make_bucket(name)
    return name, S3Store(s3, name)


def publish_on(store: S3Store, uid: str, driver: str, day: str, engine: bytes | None = None) -> dict:
    """One publication as the operator makes it: the measured engine from the runs area, through
    `publish`, with the index entry `index_entry` writes (its stack from the measuring process)."""
    keys = CatalogKeys("mlp", GPU, ORT, MODEL_SHA, "cd" * 6, uid)
    engine = engine or os.urandom(1024) + uid.encode()
    sha = hashlib.sha256(engine).hexdigest()
    measured = f"runs/ns/{uid}/{GPU}/engines/winner.ort.tar"
    store.put(measured, engine)
    entry = {
        "gpuProduct": GPU,
        "compilerVersion": ORT,
        "folder": keys.folder,
        "engine": store.uri(keys.engine(".ort.tar")),
        "sha256": sha,
        "modelSha256": MODEL_SHA,
        "run": f"ns/{uid}",
        "runUid": uid,
        "publishedAt": f"2026-11-{day}T00:00:00Z",
        "stack": stack_of(ORT, Versions(compiler=ORT, driver=f"{driver}.54.15")).wire(),
    }
    provenance = {
        "engine": {"uri": entry["engine"], "sha256": sha},
        "model": {"sha256": MODEL_SHA},
        "accuracy": {"disabled": False, "lossPerOutput": {"y": 1e-6}},
        "compiler": {"name": "onnxruntime", "versions": {"compiler": ORT, "driver": f"{driver}.54.15"}},
        "route": {"id": "winner"},
    }
    publish(store, store, keys, measured, ".ort.tar", sha, provenance, "# report\n", entry, lambda index: index)
    return {**entry, "bytes": engine}


def run(cluster, bucket_name, *args):
    words = 2 if args[0] == "catalog" else 1
    return subprocess.run(
        [sys.executable, "-m", "enginewright", *args[:words], "--catalog", f"s3://{bucket_name}", *args[words:]],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def fetch_for(cluster, bucket_name, dest, *extra):
    return run(
        cluster,
        bucket_name,
        "fetch",
        "--model",
        "mlp",
        "--gpu",
        GPU,
        "--compiler-version",
        ORT,
        "--dest",
        str(dest),
        "--json",
        *extra,
    )


def test_a_new_stack_keeps_the_old_entry_superseded_and_fetch_chooses_per_stack(cluster, bucket, tmp_path):
    name, store = bucket
    old = publish_on(store, "old-uid", "535", "10")
    new = publish_on(store, "new-uid", "550", "20")

    index = read_index(store, CatalogKeys("mlp", GPU, ORT, MODEL_SHA, "cd" * 6, "x"))
    by_uid = {e["runUid"]: e for e in index["entries"]}
    assert set(by_uid) == {"old-uid", "new-uid"}  # kept
    assert by_uid["old-uid"]["supersededBy"] == {
        "run": "ns/new-uid",
        "runUid": "new-uid",
        "folder": new["folder"],
        "stack": {"driverMajor": "550", "compiler": "onnxruntime", "compilerVersion": ORT},
    }
    assert "supersededBy" not in by_uid["new-uid"]

    # Publishing the new one again (a retried pass) changes no mark.
    publish_on(store, "new-uid", "550", "20", new["bytes"])
    again = {
        e["runUid"]: e for e in read_index(store, CatalogKeys("mlp", GPU, ORT, MODEL_SHA, "cd" * 6, "x"))["entries"]
    }
    assert again["old-uid"]["supersededBy"] == by_uid["old-uid"]["supersededBy"] and len(again) == 2

    for driver, want in (("535", old), ("550", new)):
        dest = tmp_path / driver
        done = fetch_for(cluster, name, dest, "--driver-major", driver)
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["runUid"] == want["runUid"] and out["driverMajor"] == driver
        assert f"on driver major {driver}" in out["selection"]
        assert (dest / "engine.ort.tar").read_bytes() == want["bytes"]
    assert (
        "superseded by run ns/new-uid"
        in json.loads(fetch_for(cluster, name, tmp_path / "o", "--driver-major", "535").stdout)["selection"]
    )

    fallback = fetch_for(cluster, name, tmp_path / "560", "--driver-major", "560")
    assert fallback.returncode == 0, fallback.stderr
    out = json.loads(fallback.stdout)
    assert out["runUid"] == "new-uid" and "no compatible engine was measured on driver major 560" in out["selection"]

    refused = fetch_for(cluster, name, tmp_path / "strict", "--driver-major", "560", "--same-driver")
    assert refused.returncode == EXIT_INCOMPATIBLE
    assert "driver major 560" in refused.stderr and "driver 535" in refused.stderr and "driver 550" in refused.stderr
    assert not (tmp_path / "strict" / "engine.ort.tar").exists()


def test_an_index_without_stacks_still_reads(cluster, bucket, tmp_path):
    name, store = bucket
    keys = CatalogKeys("mlp", GPU, ORT, MODEL_SHA, "cd" * 6, "legacy-uid")
    engine = os.urandom(512)
    sha = hashlib.sha256(engine).hexdigest()
    store.put(keys.engine(".ort.tar"), engine)
    store.put(
        keys.provenance,
        json.dumps(
            {
                "engine": {"sha256": sha},
                "model": {"sha256": MODEL_SHA},
                "accuracy": {"disabled": False},
                "compiler": {"versions": {"compiler": ORT, "driver": "535.104.05"}},
            }
        ).encode(),
    )
    legacy = {  # the index as written before stacks were recorded
        "gpuProduct": GPU,
        "compilerVersion": ORT,
        "folder": keys.folder,
        "engine": store.uri(keys.engine(".ort.tar")),
        "sha256": sha,
        "modelSha256": MODEL_SHA,
        "run": "ns/legacy",
        "runUid": "legacy-uid",
        "publishedAt": "2026-10-01T00:00:00Z",
    }
    store.put(keys.index, json.dumps({"model": "mlp", "entries": [legacy]}).encode())

    done = fetch_for(cluster, name, tmp_path / "e", "--driver-major", "535")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["runUid"] == "legacy-uid" and out["driverMajor"] == "535"  # from its provenance
    assert (tmp_path / "e" / "engine.ort.tar").read_bytes() == engine
    listed = run(cluster, name, "catalog", "list", "--model", "mlp", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "legacy-uid" in listed.stdout

    # A publication on a new stack over the old index: the old entry is kept; the same compiler
    # version and no recorded driver cannot be told apart from the new stack, so it is not marked.
    publish_on(store, "new-uid", "550", "20")
    entries = {e["runUid"]: e for e in read_index(store, keys)["entries"]}
    assert set(entries) == {"legacy-uid", "new-uid"} and "supersededBy" not in entries["legacy-uid"]
    chosen = json.loads(fetch_for(cluster, name, tmp_path / "f", "--driver-major", "535").stdout)
    assert chosen["runUid"] == "legacy-uid"  # its provenance's driver matches


def test_same_driver_without_a_driver_is_a_usage_error(cluster, bucket, tmp_path):
    name, store = bucket
    publish_on(store, "only-uid", "550", "10")
    done = fetch_for(cluster, name, tmp_path / "e", "--same-driver")
    assert done.returncode == 2 and "--same-driver needs the consumer's driver: pass --driver-major" in done.stderr
    assert not (tmp_path / "e").exists()
