"""ONNX Runtime's default knob space includes thread counts derived from the cores the worker may use
(issue 19, ask 7): on a small model one thread ran 1.8x faster than ORT's choice (every physical core
of the machine), and nobody found it without naming the knob. The counts are suggestions: any
integer a user names is still allowed."""

from __future__ import annotations

import os

from enginewright.api.contracts import KnobInfo
from enginewright.backends.onnxruntime import OnnxRuntimeBackend, thread_counts, usable_cores
from enginewright.search.planners import build_space


def test_the_cores_a_worker_may_use_follow_its_cpuset_and_its_cgroup_quota():
    assert usable_cores(affinity=64, cpu_max="200000 100000\n") == 2  # a pod limited to 2 CPUs on 64 cores
    assert usable_cores(affinity=64, cpu_max="150000 100000") == 2  # 1.5 CPUs: rounded up
    assert usable_cores(affinity=4, cpu_max="800000 100000") == 4  # a cpuset smaller than the quota
    assert usable_cores(affinity=16, cpu_max="max 100000") == 16  # no quota
    assert usable_cores(affinity=8, cpu_max="") == 8  # no cgroup v2 file
    assert usable_cores(affinity=64, cpu_max="50000 100000") == 1  # half a CPU: one thread


def test_thread_counts_are_orts_choice_one_half_and_all():
    assert thread_counts(1) == ("0", "1")
    assert thread_counts(2) == ("0", "1", "2")
    assert thread_counts(16) == ("0", "1", "8", "16")


def test_the_default_space_sweeps_this_workers_thread_counts_and_a_named_count_is_still_allowed():
    knobs = OnnxRuntimeBackend().knobs()
    threads = next(k for k in knobs if k.name == "intra_op_num_threads")
    assert threads.suggested == thread_counts(usable_cores()) and threads.values is None
    # the probe's knob list crosses to the controller as KnobInfo: the suggestion must survive it
    (crossed,) = [KnobInfo.model_validate_json(KnobInfo.of(threads).model_dump_json()).knob()]
    assert crossed == threads
    space = {k.name: k.values for k in build_space([crossed])}
    assert space["intra_op_num_threads"] == thread_counts(usable_cores())
    assert "1" in space["intra_op_num_threads"]
    # a count the user names (not among the suggestions) is allowed: the knob stays open-ended
    named = {k.name: k.values for k in build_space([crossed], [("intra_op_num_threads", ("3",))])}
    assert named["intra_op_num_threads"] == ("0", "3")
    assert usable_cores() <= len(os.sched_getaffinity(0))
