"""A LocalCluster whose node agent runs pods from the locally built images (image mode, see
tests/cluster/node_agent.py) instead of host processes; used by the image-based operator test, the
Helm install test and `make demo IMAGES=1`."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.harness import REPO, LocalCluster
from tests.cluster.images import ImageStore, default_store, image_name

CI_IMAGES = ("operator", "worker-onnxruntime")


def require_images(store: Path | None = None) -> ImageStore:
    """The image store with the CI images in it; a clear error (never a skip) when they were not built."""
    images = ImageStore(store or default_store())
    missing = [image_name(kind) for kind in CI_IMAGES if not images.has(image_name(kind))]
    if missing:
        raise RuntimeError(f"images {', '.join(missing)} are not in {images.layout}: run `make images` "
                           f"(`make setup` does) first")
    return images


@dataclass
class ImageCluster(LocalCluster):
    images: Path = field(default_factory=default_store)

    def _start_node_agent(self) -> None:
        nodes = self.workdir / "nodes.json"
        import json
        nodes.write_text(json.dumps(self.nodes))
        env = self.env
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "operator"), env.get("PYTHONPATH", "")])
        self._spawn("node-agent", [sys.executable, "-m", "tests.cluster.node_agent",
                                   "--kubeconfig", str(self.kubeconfig), "--nodes", str(nodes),
                                   "--workdir", str(self.workdir / "pods"), "--images", str(self.images)], env=env)


MODELS_BUCKET, RUNS_BUCKET = "enginewright-models", "enginewright"
EXAMPLE_FILES = ("mlp.onnx", "inputs-0.npz", "inputs-1.npz", "references-0.npz", "references-1.npz")


def put_example(cluster: LocalCluster, folder: Path):
    """The example model and reference data (examples/make_example.py) in the cluster's S3 store;
    returns an S3 client."""
    from minio import Minio

    from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY
    sys.path.insert(0, str(REPO / "examples"))
    from make_example import write_example
    write_example(folder)
    s3 = Minio(cluster.s3_endpoint, access_key=S3_ACCESS_KEY, secret_key=S3_SECRET_KEY, secure=False)
    for bucket in (MODELS_BUCKET, RUNS_BUCKET):
        if not s3.bucket_exists(bucket):
            s3.make_bucket(bucket)
    for name in EXAMPLE_FILES:
        s3.fput_object(MODELS_BUCKET, f"example/{name}", str(folder / name))
    return s3


def store_secret(cluster: LocalCluster, namespace: str, name: str = "enginewright-store") -> None:
    from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY
    cluster.kubectl("create", "secret", "generic", name, "-n", namespace,
                    f"--from-literal=AWS_ACCESS_KEY_ID={S3_ACCESS_KEY}",
                    f"--from-literal=AWS_SECRET_ACCESS_KEY={S3_SECRET_KEY}")
