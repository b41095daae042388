"""Object-store access: a local-directory store (the `tune` command, tests) and an S3 store through
the minio SDK (workers, the controller, the catalog)."""

from enginewright.store.objects import LocalStore, ObjectStore, S3Store, parse_s3_uri, store_from_env

__all__ = ["LocalStore", "ObjectStore", "S3Store", "parse_s3_uri", "store_from_env"]
