"""The same ONNX Runtime route built twice is the same engine, byte for byte, so its sha256 in the
catalog and provenance names the route's build and not the moment of it. Before, the optimized model
went into the engine's tar with its file's mtime (fractional, in a PAX header) and owner: two builds
a few milliseconds apart were two engines with two hashes."""

import hashlib
import io
import tarfile

import numpy as np

from enginewright.backends.base import BuildRequest
from enginewright.backends.onnxruntime import OnnxRuntimeBackend

ROUTE = {"graph_optimization_level": "extended", "intra_op_num_threads": "1"}


def test_a_route_built_twice_in_two_folders_is_the_same_bytes(example, tmp_path):
    backend = OnnxRuntimeBackend()
    engines = []
    for name in ("first", "second"):
        workdir = tmp_path / name
        workdir.mkdir()
        engines.append(backend.build(BuildRequest(model_path=example / "mlp.onnx", workdir=workdir), ROUTE))
    assert hashlib.sha256(engines[0]).hexdigest() == hashlib.sha256(engines[1]).hexdigest()
    with tarfile.open(fileobj=io.BytesIO(engines[0])) as tar:
        members = {m.name: (m.mtime, m.uname, m.uid, m.pax_headers) for m in tar.getmembers()}
    assert members == {"model.onnx": (0, "", 0, {}), "settings.json": (0, "", 0, {})}

    runner = backend.load(engines[1], tmp_path / "load")
    image = np.load(example / "inputs-0.npz")["image"]
    reference = np.load(example / "references-0.npz")["logits"]
    assert np.allclose(runner.run({"image": image})["logits"], reference, atol=1e-3)
