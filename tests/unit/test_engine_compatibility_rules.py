"""The rules that decide which catalog engine a machine may run, and which of several it gets."""

import pytest

from enginewright.catalog.compatibility import (
    HARDWARE_COMPATIBLE,
    SAME_COMPUTE_CAPABILITY,
    SAME_HARDWARE,
    SAME_PRODUCT,
    Consumer,
    Installed,
    NoCompatibleEngine,
    NotInCatalog,
    Offer,
    gpu_match,
    judge,
    select,
    version_problem,
)
from enginewright.catalog.listing import coverage, render_table

ORT = Installed("onnxruntime-1.32.0")
TORCH = "inductor-torch-2.11.0+cu130-triton-3.6.0"


def offer(gpu="NVIDIA-H200", version="onnxruntime-1.32.0", uid="u1", day="10", speedup=1.2, validated=True, **kw):
    return Offer(
        gpu_product=gpu,
        compiler_version=version,
        run_uid=uid,
        run=f"ns/{uid}",
        published_at=f"2026-11-{day}T00:00:00Z",
        sha256="0" * 64,
        engine=f"s3://b/{uid}/engine",
        folder=f"catalog/m/{uid}",
        speedup=speedup,
        accuracy_validated=validated,
        **kw,
    )


def h200(**compilers):
    return Consumer("NVIDIA-H200", "9.0", compilers or {"onnxruntime": ORT})


# ---------------------------------------------------------------- ONNX Runtime
@pytest.mark.parametrize(
    "built,ok",
    [
        ("onnxruntime-1.32.0", True),
        ("onnxruntime-1.32.4", True),
        ("onnxruntime-1.31.9", False),
        ("onnxruntime-2.32.0", False),
    ],
)
def test_onnxruntime_needs_the_same_minor(built, ok):
    problem = version_problem(offer(version=built), ORT)
    assert (problem is None) == ok
    if not ok:
        assert built in problem and "onnxruntime-1.32.0" in problem and "major.minor" in problem


def test_a_compiler_that_is_not_installed_is_named():
    assert "no tensorrt is installed" in version_problem(offer(version="tensorrt-10.13.0.35"), None)


# ---------------------------------------------------------------- TensorRT
def test_tensorrt_needs_the_same_version_unless_built_version_compatible():
    trt = Installed("tensorrt-10.13.0.35")
    assert version_problem(offer(version="tensorrt-10.13.0.35"), trt) is None
    assert "same TensorRT version" in version_problem(offer(version="tensorrt-10.12.0.36"), trt)
    assert version_problem(offer(version="tensorrt-10.12.0.36", version_compatible=True), trt) is None
    newer = offer(version="tensorrt-10.14.1.48", version_compatible=True)
    assert "at least as new" in version_problem(newer, trt)


def test_tensorrt_engines_match_product_compute_capability_or_declared_hardware_level():
    consumer = Consumer("NVIDIA-H100-80GB-HBM3", "9.0", {"tensorrt": Installed("tensorrt-10.13.0.35")})
    trt = "tensorrt-10.13.0.35"
    assert gpu_match(offer(gpu="NVIDIA-H100-80GB-HBM3", version=trt), consumer) == SAME_PRODUCT
    assert gpu_match(offer(version=trt, compute_capability="9.0"), consumer) == SAME_COMPUTE_CAPABILITY
    assert gpu_match(offer(gpu="NVIDIA-L40S", version=trt, compute_capability="8.9"), consumer) is None
    ampere_plus = offer(gpu="NVIDIA-L40S", version=trt, compute_capability="8.9", hardware_compatibility_level=1)
    assert gpu_match(ampere_plus, consumer) == HARDWARE_COMPATIBLE
    old = Consumer("Tesla-T4", "7.5", consumer.compilers)
    assert gpu_match(ampere_plus, old) is None


def test_other_compilers_need_the_same_product_even_at_equal_compute_capability():
    consumer = Consumer("NVIDIA-H100-80GB-HBM3", "9.0", {"onnxruntime": ORT})
    assert gpu_match(offer(compute_capability="9.0"), consumer) is None


def test_a_shared_gpu_takes_the_engines_of_the_same_gpu():
    shared = Consumer("NVIDIA-H200-SHARED", "9.0", {"onnxruntime": ORT})
    assert gpu_match(offer(), shared) == SAME_HARDWARE
    assert gpu_match(offer(gpu="NVIDIA-H200-SHARED"), shared) == SAME_PRODUCT


# ---------------------------------------------------------------- Inductor
def test_inductor_needs_the_same_torch_triton_and_cuda():
    here = Installed(TORCH, "13.0")
    assert version_problem(offer(version=TORCH, cuda="13.0"), here) is None
    assert "CUDA 12.8 != installed 13.0" in version_problem(offer(version=TORCH, cuda="12.8"), here)
    other_triton = version_problem(offer(version="inductor-torch-2.11.0+cu130-triton-3.5.0", cuda="13.0"), here)
    assert "Triton 3.5.0 != installed 3.6.0" in other_triton
    other_torch = version_problem(offer(version="inductor-torch-2.10.0+cu130-triton-3.6.0", cuda="13.0"), here)
    assert "torch 2.10.0+cu130 != installed 2.11.0+cu130" in other_torch


# ---------------------------------------------------------------- provenance facts
def test_offer_from_index_entry_and_provenance():
    entry = {
        "gpuProduct": "NVIDIA-H200",
        "compilerVersion": "tensorrt-10.13.0.35",
        "runUid": "abc",
        "run": "ns/r",
        "publishedAt": "2026-11-10T00:00:00Z",
        "sha256": "1" * 64,
        "engine": "s3://b/catalog/m/x/engine.plan",
        "folder": "catalog/m/x",
        "speedup": 1.5,
        "confirmed": True,
    }
    prov = {
        "accuracy": {"disabled": True, "lossPerOutput": {"a": 1e-5, "b": 3e-5}},
        "gpu": {"product": "NVIDIA-H200", "computeCapability": "9.0"},
        "compiler": {"versions": {"compiler": "tensorrt-10.13.0.35", "cuda": "13.0"}},
        "route": {"baseSettings": {"hardware_compatibility_level": "1"}, "knobs": {"version_compatible": "true"}},
    }
    got = Offer.from_catalog(entry, prov)
    assert (got.accuracy_validated, got.worst_loss, got.compute_capability, got.cuda) == (False, 3e-5, "9.0", "13.0")
    assert got.hardware_compatibility_level == 1 and got.version_compatible and got.compiler == "tensorrt"
    assert Offer.from_catalog(entry).accuracy_validated is None


# ---------------------------------------------------------------- selection
def test_newest_speedup_and_pinned_run_among_several_runs():
    runs = [
        offer(uid="old", day="01", speedup=1.9),
        offer(uid="mid", day="05", speedup=1.1),
        offer(uid="new", day="09", speedup=1.3),
    ]
    assert select(runs, h200(), model="m").offer.run_uid == "new"
    assert select(runs, h200(), model="m", prefer="speedup").offer.run_uid == "old"
    pinned = select(runs, h200(), model="m", run_uid="mid")
    assert pinned.offer.run_uid == "mid" and pinned.how.startswith("pinned run")


def test_require_validated_skips_engines_whose_accuracy_was_off():
    runs = [
        offer(uid="checked", day="01"),
        offer(uid="unchecked", day="09", validated=False),
        offer(uid="unknown", day="10", validated=None),
    ]
    assert select(runs, h200(), model="m").offer.run_uid == "unknown"
    assert select(runs, h200(), model="m", require_validated=True).offer.run_uid == "checked"
    with pytest.raises(NoCompatibleEngine, match="accuracy was not validated"):
        select(runs[1:2], h200(), model="m", require_validated=True)


def test_the_closest_gpu_match_wins_over_a_newer_one():
    trt = Installed("tensorrt-10.13.0.35")
    consumer = Consumer("NVIDIA-H200", "9.0", {"tensorrt": trt})
    same_cc = offer(
        gpu="NVIDIA-H100-80GB-HBM3", version="tensorrt-10.13.0.35", uid="h100", day="20", compute_capability="9.0"
    )
    own = offer(version="tensorrt-10.13.0.35", uid="h200", day="01")
    chosen = select([same_cc, own], consumer, model="m")
    assert chosen.offer.run_uid == "h200" and "1 more match less closely" in chosen.how
    assert select([same_cc], consumer, model="m").offer.run_uid == "h100"


def test_a_mismatch_says_what_was_found_and_what_the_catalog_offers():
    offers = [offer(version="onnxruntime-1.31.0", uid="a"), offer(gpu="NVIDIA-L40S", uid="b")]
    with pytest.raises(NoCompatibleEngine) as refused:
        select(offers, h200(), model="mlp")
    text = str(refused.value)
    assert "found: GPU NVIDIA-H200 (compute capability 9.0), onnxruntime-1.32.0" in text
    assert "NVIDIA-H200 onnxruntime-1.31.0 run ns/a" in text and "needs the same major.minor" in text
    assert "NVIDIA-L40S onnxruntime-1.32.0 run ns/b" in text and "this GPU is NVIDIA-H200" in text


def test_nothing_to_choose_from_is_not_found():
    with pytest.raises(NotInCatalog, match="no engine for model 'm'"):
        select([], h200(), model="m")
    with pytest.raises(NotInCatalog, match="no engine from run 'zzz'"):
        select([offer()], h200(), model="m", run_uid="zzz")
    assert judge(offer(), h200()).ok


def test_coverage_shows_cells_and_gaps():
    offers = [
        offer(uid="a", day="01"),
        offer(uid="b", day="02", speedup=1.5, worst_loss=2e-6),
        offer(gpu="NVIDIA-L40S", version="onnxruntime-1.31.0", uid="c"),
    ]
    data = coverage("m", offers)
    assert data["gpuProducts"] == ["NVIDIA-H200", "NVIDIA-L40S"]
    assert data["compilerVersions"] == ["onnxruntime-1.31.0", "onnxruntime-1.32.0"]
    assert data["gaps"] == [["NVIDIA-H200", "onnxruntime-1.31.0"], ["NVIDIA-L40S", "onnxruntime-1.32.0"]]
    cell = next(c for c in data["cells"] if c["gpuProduct"] == "NVIDIA-H200")
    assert [e["runUid"] for e in cell["entries"]] == ["b", "a"]
    table = render_table(data)
    assert "1.50x loss 2.0e-06 2026-11-02 ns/b (+1)" in table and "2 gap(s)" in table
