"""Where every object lives in the store, defined once.

    runs/<namespace>/<run>-<uid8>/<gpu-type>/probe.json                 the compiler's knobs and versions
    runs/<namespace>/<run>-<uid8>/<gpu-type>/entries/<route-id>.json    one cache entry per route
    runs/<namespace>/<run>-<uid8>/<gpu-type>/engines/<route-id><ext>    kept engines
    runs/<namespace>/<run>-<uid8>/<gpu-type>/confirm/<name>.json        confirmation rounds
    runs/<namespace>/<run>-<uid8>/<gpu-type>/reused.json                 routes taken from earlier runs
    runs/<namespace>/<run>-<uid8>/<gpu-type>/seeded.json                 what spec.search.seedCache gave
    catalog/<model>/<gpu-product>/<compiler-version>/<model-sha12>-<shapes-hash>/<run-uid>/engine<ext>
    catalog/<model>/<gpu-product>/<compiler-version>/<model-sha12>-<shapes-hash>/<run-uid>/provenance.json
    catalog/<model>/<gpu-product>/<compiler-version>/<model-sha12>-<shapes-hash>/<run-uid>/report.md
    catalog/<model>/<gpu-product>/<compiler-version>/<model-sha12>-<shapes-hash>/<run-uid>/routes.json
    catalog/<model>/index.json
    catalog/<model>/index.html                         the catalog site: the model's page
    catalog/index.html                                 the catalog site: its index

Every user-chosen name becomes one escaped key segment (`store.keys.safe_segment`).
"""

from __future__ import annotations

from dataclasses import dataclass

from enginewright.store.keys import object_key, safe_segment, unescape_segment

LOCAL_PREFIX = "runs/local"  # `enginewright tune`'s single target
CATALOG = "catalog"  # the folder holding the model folders
# Files of a published engine's folder, beside engine<ext>.
PROVENANCE, REPORT, ROUTES = "provenance.json", "report.md", "routes.json"
INDEX, PAGE = "index.json", "index.html"  # a model folder's index, and a site page


def run_prefix(namespace: str, run: str, uid: str, gpu_type: str) -> str:
    """Prefix of one run's objects for one target."""
    return object_key("runs", namespace, f"{run}-{uid[:8]}", gpu_type)


@dataclass(frozen=True)
class RunKeys:
    """Keys under one run-and-target prefix."""

    prefix: str

    @property
    def probe(self) -> str:
        return f"{self.prefix}/probe.json"

    @property
    def entries(self) -> str:
        return f"{self.prefix}/entries/"

    def entry(self, route_id: str) -> str:
        return f"{self.prefix}/entries/{safe_segment(route_id)}.json"

    def engine(self, route_id: str, suffix: str) -> str:
        return f"{self.prefix}/engines/{safe_segment(route_id + suffix)}"

    @property
    def confirmations(self) -> str:
        return f"{self.prefix}/confirm/"

    def confirmation(self, name: str) -> str:
        return f"{self.prefix}/confirm/{safe_segment(name)}.json"

    @property
    def reused(self) -> str:
        """What this run took from earlier runs (`controller.reuse`), written once those entries are in."""
        return f"{self.prefix}/reused.json"

    @property
    def seeded(self) -> str:
        """What this run took from spec.search.seedCache and what it could not (`controller.seed`)."""
        return f"{self.prefix}/seeded.json"

    def request(self, batch: str) -> str:
        """The batch request a Job reads (it grows with the spec: no environment variable holds it)."""
        return f"{self.prefix}/requests/{safe_segment(batch)}.json"


@dataclass(frozen=True)
class CatalogKeys:
    """Keys of one published engine and of its model's index."""

    model: str
    gpu_product: str
    compiler_version: str  # e.g. onnxruntime-1.20.1
    model_sha256: str
    shapes_hash: str
    run_uid: str

    @property
    def folder(self) -> str:
        return object_key(
            CATALOG,
            self.model,
            self.gpu_product,
            self.compiler_version,
            f"{self.model_sha256[:12]}-{self.shapes_hash[:12]}",
            self.run_uid,
        )

    def engine(self, suffix: str) -> str:
        return f"{self.folder}/{safe_segment('engine' + suffix)}"

    @property
    def provenance(self) -> str:
        return in_folder(self.folder, PROVENANCE)

    @property
    def report(self) -> str:
        return in_folder(self.folder, REPORT)

    @property
    def routes(self) -> str:
        return in_folder(self.folder, ROUTES)

    @property
    def index(self) -> str:
        return index_key(self.model)


def index_key(model: str) -> str:
    """Key of a model's index in the operator's catalog folder."""
    return catalog_key(CATALOG, model_index(model))


def catalog_key(prefix: str, path: str) -> str:
    """Key of `path` (relative to a catalog folder: `model_index`, `site_page`) in the catalog folder
    `prefix` (`CATALOG` as the operator publishes; '' when the bucket or directory is the folder)."""
    return f"{prefix}/{path}" if prefix else path


def indexed_model(prefix: str, key: str) -> str | None:
    """The model whose index `key` is, in the catalog folder `prefix`; None for any other key, and
    for an index under a folder no model's name is written as (a shortened name's, another writer's
    `%41` or `a~b`): the catalog could not read that model back by its name (`model_index`)."""
    base = catalog_key(prefix, "")
    parts = key[len(base) :].split("/") if key.startswith(base) else []
    if len(parts) != 2 or parts[1] != INDEX:
        return None
    model = unescape_segment(parts[0])
    return model if model and safe_segment(model) == parts[0] else None


def in_folder(folder: str, name: str) -> str:
    """Key of one of an engine folder's files (`folder` as an index entry records it)."""
    return f"{folder}/{name}"


def entry_engine(folder: str, engine_uri: str) -> str:
    """Key of an index entry's engine: the file its URI names, in the entry's folder (the URI may be
    of another store: a copy of the bucket, or a local directory)."""
    return in_folder(folder, engine_uri.rsplit("/", 1)[-1])


def site_page(model: str | None = None) -> str:
    """Path of a catalog site page relative to the catalog folder: `index.html` (the index) or
    `<model>/index.html` (a model's page, beside its index.json)."""
    return PAGE if model is None else f"{safe_segment(model)}/{PAGE}"


def model_index(model: str) -> str:
    """Path of a model's index relative to the catalog folder."""
    return f"{safe_segment(model)}/{INDEX}"
