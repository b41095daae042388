"""What publishing records in the model's `index.json` (pure, `catalog.writer`): the engine, its
digest, route and confirmed speedup, the run, and the measuring node's compute capability from GPU
feature discovery's labels, and the stack it was measured on (driver major, compiler and its versions)."""

from enginewright.api.cache import CacheEntry, Outcome, TimingStats
from enginewright.api.contracts import IndexEntry, ProbeResult
from enginewright.api.routes import Route
from enginewright.catalog.writer import gpu_facts, index_entry
from enginewright.measure.paired import load_key
from enginewright.search.flow import Decided
from enginewright.search.winner import confirm
from enginewright.store.layout import CatalogKeys


def entry(knobs, median):
    route = Route.of(knobs)
    return CacheEntry(
        target="NVIDIA-H200",
        route_id=route.id,
        route=route.canonical,
        knobs=knobs,
        outcome=Outcome.ok,
        batch="stage1-b000",
        engine_sha256="ab" * 32,
        baseline_ms=120.0,
        timing=TimingStats(median_ms=median, mean_ms=median, p90_ms=median, min_ms=median, n=5),
    )


def test_the_index_entry_names_the_engine_the_route_the_run_and_the_gpu():
    default, winner = entry({}, 120.0), entry({"intra_op_num_threads": "2"}, 110.0)
    rounds = {}
    for i in range(5):
        rounds[load_key(default.route_id, i)] = [120.0 * (1 + 0.004 * i) * (1 + 0.01 * r) for r in range(5)]
        rounds[load_key(winner.route_id, i)] = [110.0 * (1 - 0.004 * i) * (1 + 0.01 * r) for r in range(5)]
    step = Decided(confirm(rounds, default.route_id, 0.03), default, (default, winner), planned=2)
    keys = CatalogKeys(
        model="resnet50",
        gpu_product="NVIDIA-H200",
        compiler_version="onnxruntime-1.20.1",
        model_sha256="cd" * 32,
        shapes_hash="0123456789ab",
        run_uid="uid-1",
    )
    node = gpu_facts(
        "gpu-node-1",
        {
            "nvidia.com/gpu.compute.major": "9",
            "nvidia.com/gpu.compute.minor": "0",
            "nvidia.com/cuda.driver.major": "570",
            "nvidia.com/cuda.driver.minor": "86",
        },
    )
    assert node == {"node": "gpu-node-1", "computeCapability": "9.0", "driver": "570.86"}
    wire = index_entry(
        keys=keys,
        step=step,
        probe=ProbeResult(ok=True, model_sha256="cd" * 32),
        engine_uri="s3://catalog/e.onnx",
        run="team-a/r",
        run_uid="uid-1",
        node=node,
        published_at="2026-12-01T00:00:00Z",
    )
    parsed = IndexEntry.model_validate(wire)
    assert (parsed.engine, parsed.sha256, parsed.route, parsed.folder) == (
        "s3://catalog/e.onnx",
        "ab" * 32,
        winner.route,
        keys.folder,
    )
    assert parsed.speedup == step.decision.speedup and parsed.confirmed == step.decision.confirmed
    assert (parsed.run, parsed.run_uid, parsed.gpu_product, parsed.compiler_version) == (
        "team-a/r",
        "uid-1",
        "NVIDIA-H200",
        "onnxruntime-1.20.1",
    )
    assert parsed.compute_capability == "9.0" and wire["publishedAt"] == "2026-12-01T00:00:00Z"
    # The measuring process named no driver (a CPU-side backend): the node's labels say which.
    assert wire["stack"] == {"driverMajor": "570", "compiler": "onnxruntime", "compilerVersion": "onnxruntime-1.20.1"}


def test_a_node_without_gpu_feature_discovery_is_named_only():
    assert gpu_facts("n1", {}) == {"node": "n1"}
