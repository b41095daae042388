"""The catalog's writer beside its reader (`catalog.writer.publish`, `catalog.reader.Catalog`, on a
local-directory store): a publication is read back by the reader as written — engine, provenance,
routes, the index entry in the index `admit` returned; a refused publication and an engine whose bytes
are not the measured ones write nothing; publishing the same folder again replaces its entry."""

import hashlib
import json

import pytest

from enginewright.catalog.reader import Catalog
from enginewright.catalog.writer import PublishError, PublishRefused, publish, read_index
from enginewright.store.layout import CatalogKeys
from enginewright.store.objects import LocalStore

ENGINE = b"measured engine bytes"
KEYS = CatalogKeys(
    model="resnet 50/fp16",  # a name that needs escaping
    gpu_product="NVIDIA-H200",
    compiler_version="onnxruntime-1.20.1",
    model_sha256="cd" * 32,
    shapes_hash="0123456789ab",
    run_uid="uid-1",
)


@pytest.fixture
def stores(tmp_path):
    runs, catalog = LocalStore(tmp_path / "runs"), LocalStore(tmp_path / "catalog")
    runs.put("runs/ns/r/cpu/engines/route.onnx", ENGINE)
    return runs, catalog


def entry(catalog, published_at="2026-12-01T00:00:00Z") -> dict:
    return {
        "folder": KEYS.folder,
        "engine": catalog.uri(KEYS.engine(".onnx")),
        "gpuProduct": KEYS.gpu_product,
        "publishedAt": published_at,
        "run": "team-a/r",
    }


def owned_by_team_a(index: dict) -> dict:
    return {**index, "owner": {"namespace": "team-a"}}


def publish_to(runs, catalog, admit=owned_by_team_a, sha256=None, published_at="2026-12-01T00:00:00Z") -> str:
    return publish(
        runs,
        catalog,
        KEYS,
        "runs/ns/r/cpu/engines/route.onnx",
        ".onnx",
        sha256 or hashlib.sha256(ENGINE).hexdigest(),
        {"route": {"id": "route"}},
        "# report\n",
        entry(catalog, published_at),
        admit,
        {"routes": []},
    )


def test_the_reader_finds_what_the_writer_published(stores):
    runs, catalog = stores
    uri = publish_to(runs, catalog)
    reader = Catalog(catalog)
    assert reader.models() == [KEYS.model]
    doc = reader.index_doc(KEYS.model)
    assert doc["owner"] == {"namespace": "team-a"} and doc["model"] == KEYS.model
    [found] = reader.index(KEYS.model)
    assert found == entry(catalog) and found["engine"] == uri
    assert catalog.get(reader.engine_key(found)) == ENGINE
    assert json.loads(reader.provenance_bytes(found)) == {"route": {"id": "route"}}
    assert json.loads(reader.routes_bytes(found)) == {"routes": []}
    assert catalog.get(f"{KEYS.folder}/report.md") == b"# report\n"


def test_a_refused_publication_writes_nothing(stores):
    runs, catalog = stores

    def refuse(index: dict) -> dict:
        assert index == {"model": KEYS.model, "entries": []}  # the first publication: a new index
        raise PublishRefused("CatalogModelTaken", "taken")

    with pytest.raises(PublishRefused, match="taken"):
        publish_to(runs, catalog, refuse)
    assert list(catalog.list("")) == []


def test_an_engine_that_is_not_the_measured_one_is_not_published(stores):
    runs, catalog = stores
    with pytest.raises(PublishError, match="refusing to publish a different engine"):
        publish_to(runs, catalog, sha256="00" * 32)
    assert list(catalog.list("")) == [] and read_index(catalog, KEYS) is None


def test_publishing_the_same_folder_again_replaces_its_entry(stores):
    runs, catalog = stores
    publish_to(runs, catalog)
    seen = []
    publish_to(runs, catalog, lambda index: seen.append(index) or index, published_at="2026-12-02T00:00:00Z")
    assert seen[0]["owner"] == {"namespace": "team-a"}  # admit is given the index as stored
    assert [e["publishedAt"] for e in Catalog(catalog).index(KEYS.model)] == ["2026-12-02T00:00:00Z"]
