"""The S3 server (versitygw) through the minio SDK: the calls the product uses."""

import hashlib
import io
import os

import pytest
from minio import Minio
from minio.error import S3Error


def test_put_get_is_byte_identical_with_user_metadata(s3):
    s3.make_bucket("roundtrip")
    payload = os.urandom(3 * 1024 * 1024 + 17)
    s3.put_object(
        "roundtrip",
        "engines/a.bin",
        io.BytesIO(payload),
        len(payload),
        metadata={"sha256": hashlib.sha256(payload).hexdigest(), "route": "-a=1"},
    )
    response = s3.get_object("roundtrip", "engines/a.bin")
    try:
        assert response.read() == payload
    finally:
        response.close()
        response.release_conn()
    stat = s3.stat_object("roundtrip", "engines/a.bin")
    meta = {k.lower(): v for k, v in stat.metadata.items()}
    assert meta["x-amz-meta-sha256"] == hashlib.sha256(payload).hexdigest()
    assert meta["x-amz-meta-route"] == "-a=1"
    assert [o.object_name for o in s3.list_objects("roundtrip", prefix="engines/", recursive=True)] == ["engines/a.bin"]


def test_wrong_secret_key_is_refused(cluster):
    intruder = Minio(cluster.s3_endpoint, access_key="enginewright", secret_key="wrong", secure=False)
    with pytest.raises(S3Error) as info:
        intruder.list_buckets()
    assert info.value.code in ("SignatureDoesNotMatch", "AccessDenied", "InvalidAccessKeyId")
