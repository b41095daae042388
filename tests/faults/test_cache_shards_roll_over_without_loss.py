"""With a small forced shard size the cache rolls over into several ConfigMaps while Jobs are still
writing entries: no entry is lost or duplicated across shards, and none exceeds the size."""

from tests.conftest import get_json
from tests.faults.conftest import cached_entries
from tests.operator.conftest import apply, manifest, wait_condition

KNOBS = [
    {"name": "graph_optimization_level", "values": ["basic", "extended"]},
    {"name": "enable_mem_pattern", "values": ["0"]},
    {"name": "session.intra_op.allow_spinning", "values": ["0"]},
    {"name": "enable_cpu_mem_arena", "values": ["0"]},
]
LIMIT = 2500


def test_shards_roll_over(cluster, operators, fault_namespace):
    operators.start(ENGINEWRIGHT_CACHE_SHARD_BYTES=str(LIMIT))
    doc = manifest("sharded", knobs=KNOBS)
    doc["spec"]["search"].update(routesPerJob=2, parallelism=3)
    apply(cluster, fault_namespace, doc)
    status = wait_condition(cluster, fault_namespace, "sharded", "Ready", 240)
    (target,) = status["targets"]
    assert len(target["cacheConfigMaps"]) >= 3
    entries = cached_entries(cluster, fault_namespace, status)
    assert len(entries) == len({e.route_id for e in entries}) == target["planned"] == 6
    for name in target["cacheConfigMaps"]:
        data = get_json(cluster, "configmap", name, "-n", fault_namespace)["data"]
        assert 0 < sum(len(k.encode()) + len(v.encode()) for k, v in data.items()) <= LIMIT
    assert "Traceback" not in operators.log_text()
