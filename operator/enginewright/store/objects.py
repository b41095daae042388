"""Two object stores behind one small interface: keys are '/'-separated strings."""

from __future__ import annotations

import hashlib
import io
import os
import re
from pathlib import Path
from typing import Iterator, Protocol


class ObjectStore(Protocol):
    def get(self, key: str) -> bytes: ...
    def put(
        self, key: str, data: bytes, metadata: dict[str, str] | None = None, content_type: str | None = None
    ) -> None: ...
    def exists(self, key: str) -> bool: ...
    def list(self, prefix: str) -> Iterator[str]: ...
    def uri(self, key: str) -> str: ...


class MissingObject(FileNotFoundError):
    """The object does not exist; the message names it."""


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key)."""
    match = re.fullmatch(r"s3://([^/]+)/(.+)", uri)
    if not match:
        raise ValueError(f"not an s3:// URI: {uri!r}")
    return match.group(1), match.group(2)


class LocalStore:
    """A directory used as an object store (writes are atomic renames)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root.resolve() not in path.parents:
            raise ValueError(f"key {key!r} escapes the store")
        return path

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise MissingObject(f"no object {self.uri(key)}") from None

    def put(
        self, key: str, data: bytes, metadata: dict[str, str] | None = None, content_type: str | None = None
    ) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def list(self, prefix: str) -> Iterator[str]:
        base = self.root
        for path in sorted(base.rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                key = path.relative_to(base).as_posix()
                if key.startswith(prefix):
                    yield key

    def uri(self, key: str) -> str:
        return f"file://{self._path(key)}"


class S3Store:
    """One bucket of an S3-compatible server, through the minio SDK."""

    def __init__(self, client, bucket: str):
        self.client, self.bucket = client, bucket

    def get(self, key: str) -> bytes:
        from minio.error import S3Error

        try:
            response = self.client.get_object(self.bucket, key)
        except S3Error as exc:
            if exc.code in ("NoSuchKey", "NoSuchBucket"):
                raise MissingObject(f"no object {self.uri(key)} ({exc.code})") from None
            raise
        try:
            return response.read()
        finally:
            response.close()
            response.release_conn()

    def put(
        self, key: str, data: bytes, metadata: dict[str, str] | None = None, content_type: str | None = None
    ) -> None:
        """Write the object; `content_type` (default application/octet-stream) is what a browser
        opening its URL is told (text/html for the catalog site)."""
        metadata = {"sha256": hashlib.sha256(data).hexdigest(), **(metadata or {})}
        self.client.put_object(
            self.bucket,
            key,
            io.BytesIO(data),
            len(data),
            metadata=metadata,
            content_type=content_type or "application/octet-stream",
        )

    def exists(self, key: str) -> bool:
        from minio.error import S3Error

        try:
            self.client.stat_object(self.bucket, key)
            return True
        except S3Error as exc:
            if exc.code in ("NoSuchKey", "NoSuchBucket", "NotFound"):
                return False
            raise

    def list(self, prefix: str) -> Iterator[str]:
        for obj in self.client.list_objects(self.bucket, prefix=prefix, recursive=True):
            yield obj.object_name

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"


def s3_client_from_env(endpoint: str | None = None, *, patient: bool = True):
    """A minio client from ENGINEWRIGHT_S3_ENDPOINT (or `endpoint`), AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY (set from a Secret in worker pods) and ENGINEWRIGHT_S3_SECURE (default false).

    `patient` (workers): about a minute of retries with backoff before giving up on a store that is away
    for a while (restart, failover), instead of failing the Job at the first refusal. Not patient (the
    operator): fail within seconds, so a pass reports the outage and the next one retries."""
    endpoint = endpoint or os.environ.get("ENGINEWRIGHT_S3_ENDPOINT")
    if not endpoint:
        raise RuntimeError("ENGINEWRIGHT_S3_ENDPOINT is not set: the object store's host:port is needed")
    return s3_client(
        endpoint,
        os.environ.get("AWS_ACCESS_KEY_ID"),
        os.environ.get("AWS_SECRET_ACCESS_KEY"),
        secure=os.environ.get("ENGINEWRIGHT_S3_SECURE", "false").lower() == "true",
        patient=patient,
    )


def s3_client(endpoint: str, access_key: str | None, secret_key: str | None, *, secure: bool, patient: bool):
    """A minio client of `endpoint` with the given credentials (see `s3_client_from_env` for `patient`)."""
    import urllib3
    from minio import Minio

    if patient:
        retry = urllib3.Retry(
            total=12, connect=12, read=3, backoff_factor=0.5, backoff_max=8, status_forcelist=[500, 502, 503, 504]
        )
        http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=5, read=120), retries=retry, maxsize=8)
    else:
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=3, read=30), maxsize=16, retries=urllib3.Retry(total=2, backoff_factor=0.2)
        )
    return Minio(endpoint, access_key=access_key, secret_key=secret_key, secure=secure, http_client=http)


def readable(client, bucket: str, key: str) -> str:
    """Whether these credentials can read s3://bucket/key: 'yes', 'missing' (the store told these
    credentials it does not exist), or the S3 error code that refused them (AccessDenied,
    InvalidAccessKeyId, SignatureDoesNotMatch, ...). A GET, not a HEAD: a HEAD's error has no body,
    so it cannot say why it was refused."""
    from minio.error import S3Error

    try:
        response = client.get_object(bucket, key)
    except S3Error as exc:
        return "missing" if exc.code in ("NoSuchKey", "NoSuchBucket", "NotFound") else exc.code or "AccessDenied"
    response.close()
    response.release_conn()
    return "yes"


def store_from_env(bucket: str) -> S3Store:
    return S3Store(s3_client_from_env(), bucket)
