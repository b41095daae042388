"""Reading the engine catalog the operator publishes (layout: `store.layout.CatalogKeys`):

    <prefix>/<model>/index.json                       one entry per published engine
    <entry.folder>/engine<ext>, provenance.json        keys relative to the bucket

`--catalog s3://BUCKET` or `s3://BUCKET/PREFIX` (PREFIX: the folder holding the model folders,
`catalog` by default, as the operator publishes); a local directory works too (a copy of the bucket).
Credentials for s3:// come from ENGINEWRIGHT_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
and ENGINEWRIGHT_S3_SECURE, as for workers.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import BinaryIO

from enginewright.catalog.compatibility import NotInCatalog, Offer
from enginewright.store.layout import (
    CATALOG,
    PROVENANCE,
    ROUTES,
    catalog_key,
    entry_engine,
    in_folder,
    indexed_model,
    model_index,
)
from enginewright.store.objects import LocalStore, MissingObject, S3Store

CHUNK = 1 << 20


class Catalog:
    def __init__(self, store, prefix: str = CATALOG, location: str | None = None):
        self.store, self.prefix = store, prefix.strip("/")
        # What a user passes as --catalog to reach this catalog (for the commands a site page prints).
        self.location = location or store.uri(self.prefix)

    @classmethod
    def from_uri(cls, uri: str) -> "Catalog":
        match = re.fullmatch(r"s3://([^/]+)/?(.*)", uri)
        if match:
            from enginewright.store.objects import s3_client_from_env

            return cls(S3Store(s3_client_from_env(), match.group(1)), match.group(2) or CATALOG, uri)
        root = Path(uri.removeprefix("file://"))
        if not root.is_dir():
            raise NotInCatalog(f"--catalog {uri}: not an s3:// URI and not a directory")
        return cls(LocalStore(root), CATALOG, uri)

    def uri(self, key: str) -> str:
        return self.store.uri(key)

    def key(self, path: str) -> str:
        """Key of a path relative to the catalog folder (`layout.site_page`, `layout.model_index`)."""
        return catalog_key(self.prefix, path)

    def index_key(self, model: str) -> str:
        return self.key(model_index(model))

    def models(self) -> list[str]:
        """Every model that has an index, by name."""
        found = (indexed_model(self.prefix, key) for key in self.store.list(self.key("")))
        return sorted(model for model in found if model is not None)

    def index_doc(self, model: str) -> dict:
        try:
            return json.loads(self.store.get(self.index_key(model)))
        except MissingObject:
            raise NotInCatalog(f"the catalog has no model {model!r} (no {self.uri(self.index_key(model))})") from None

    def index(self, model: str) -> list[dict]:
        return list(self.index_doc(model).get("entries") or [])

    @staticmethod
    def engine_key(entry: dict) -> str:
        return entry_engine(entry["folder"], entry["engine"])

    @staticmethod
    def provenance_key(entry: dict) -> str:
        return in_folder(entry["folder"], PROVENANCE)

    @staticmethod
    def routes_key(entry: dict) -> str:
        return in_folder(entry["folder"], ROUTES)

    def routes_bytes(self, entry: dict) -> bytes | None:
        """The entry's routes.json (None for engines published before it was written)."""
        try:
            return self.store.get(self.routes_key(entry))
        except MissingObject:
            return None

    def provenance_bytes(self, entry: dict) -> bytes | None:
        try:
            return self.store.get(self.provenance_key(entry))
        except MissingObject:
            return None

    def offers(self, model: str) -> list[tuple[Offer, dict, bytes | None]]:
        """Every entry of the model as an Offer, with its index entry and its provenance bytes; when
        the index records an owner namespace, only the entries published from it."""
        out = []
        for entry in owned_entries(self.index_doc(model)):
            raw = self.provenance_bytes(entry)
            out.append((Offer.from_catalog(entry, json.loads(raw) if raw else None), entry, raw))
        return out

    def stream(self, key: str, out: BinaryIO) -> str:
        """Copy the object to `out` in chunks; returns the sha256 of what was copied."""
        digest = hashlib.sha256()
        if isinstance(self.store, S3Store):
            from minio.error import S3Error

            try:
                response = self.store.client.get_object(self.store.bucket, key)
            except S3Error as exc:
                if exc.code in ("NoSuchKey", "NoSuchBucket"):
                    raise MissingObject(f"no object {self.uri(key)} ({exc.code})") from None
                raise
            try:
                for chunk in response.stream(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
            finally:
                response.close()
                response.release_conn()
        else:
            data = self.store.get(key)
            digest.update(data)
            out.write(data)
        return digest.hexdigest()


def owned_entries(index: dict) -> list[dict]:
    """The index's entries published from its owner namespace (all of them when it records none:
    an index from before owners, or a model shared by the operator's tenancy.modelOwners)."""
    entries = list(index.get("entries") or [])
    owner = (index.get("owner") or {}).get("namespace")
    if not owner:
        return entries
    return [e for e in entries if str(e.get("run", "")).split("/", 1)[0] == owner]
