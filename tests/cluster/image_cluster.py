"""A LocalCluster whose node agent runs pods from the locally built images (image mode, see
tests/cluster/node_agent.py) instead of host processes; used by the image-based operator test, the
Helm install test and `make demo IMAGES=1`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.harness import LocalCluster
from tests.cluster.images import ImageStore, default_store, image_name
from tests.cluster.operator_process import create_store_secret, upload_example

CI_IMAGES = ("operator", "worker-onnxruntime", "worker-inductor-cpu")


def require_images(store: Path | None = None) -> ImageStore:
    """The image store with the CI images in it; a clear error (never a skip) when they were not built."""
    images = ImageStore(store or default_store())
    missing = [image_name(kind) for kind in CI_IMAGES if not images.has(image_name(kind))]
    if missing:
        raise RuntimeError(
            f"images {', '.join(missing)} are not in {images.layout}: run `make images` (`make setup` does) first"
        )
    return images


@dataclass
class ImageCluster(LocalCluster):
    images: Path = field(default_factory=default_store)

    def node_agent_args(self) -> list[str]:
        return ["--images", str(self.images)]


MODELS_BUCKET, RUNS_BUCKET = "enginewright-models", "enginewright"


def put_example(cluster: LocalCluster, folder: Path):
    """The example model and reference data in the cluster's S3 store; returns an S3 client."""
    return upload_example(cluster, folder, MODELS_BUCKET, RUNS_BUCKET)


def store_secret(cluster: LocalCluster, namespace: str, name: str = "enginewright-store") -> None:
    create_store_secret(cluster, namespace, name)


@contextmanager
def started_image_cluster(namespace: str | None = None) -> Iterator[ImageCluster]:
    """An ImageCluster of the built CI images, up, its `image_store` set; with `namespace`, the CRDs
    installed and that namespace created with its store Secret. Stopped and removed on exit."""
    images = require_images()
    cluster = ImageCluster(images=images.layout)
    cluster.start()
    try:
        cluster.image_store = images
        if namespace:
            cluster.install_crds()
            cluster.create_namespace(namespace)
            store_secret(cluster, namespace)
        yield cluster
    finally:
        cluster.stop()
        cluster.remove()
