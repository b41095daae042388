"""An entry per stack (pure, `catalog.writer` and `catalog.compatibility`): the stack an index entry
records, which older entries a new publication marks superseded (another stack of the same GPU
product; the same stack is left to selection, as before), and `select` choosing the entry measured
on the consumer's driver major — a superseded one for its own stack — falling back with a message
that says so, or refusing with `same_driver`. An index written before stacks were recorded reads."""

import pytest

from enginewright.api.cache import Versions
from enginewright.api.contracts import IndexEntry
from enginewright.catalog.compatibility import Consumer, Installed, NoCompatibleEngine, Offer, select
from enginewright.catalog.listing import coverage, render_table
from enginewright.catalog.writer import entry_stack, same_stack, stack_of, superseded

TORCH = "inductor-torch-2.9.0+cu128-triton-3.5.0"
INDUCTOR = Installed(TORCH, "12.8")


def stack(driver="550", version=TORCH, cuda="12.8") -> dict:
    return stack_of(version, Versions(compiler=version, cuda=cuda, driver=f"{driver}.54.15")).wire()


def index_entry(uid, *, gpu="NVIDIA-H200", day="10", **stack_parts) -> dict:
    return {
        "gpuProduct": gpu,
        "compilerVersion": stack_parts.get("version", TORCH),
        "folder": f"catalog/m/{gpu}/{uid}",
        "engine": f"s3://b/{uid}/engine.pt2",
        "sha256": "0" * 64,
        "run": f"ns/{uid}",
        "runUid": uid,
        "publishedAt": f"2026-11-{day}T00:00:00Z",
        "stack": stack(**stack_parts),
    }


def test_the_stack_names_driver_major_compiler_and_inductor_versions():
    assert stack() == {
        "driverMajor": "550",
        "compiler": "inductor",
        "compilerVersion": TORCH,
        "torch": "2.9.0+cu128",
        "triton": "3.5.0",
        "cuda": "12.8",
    }
    # The process named no driver: the node's (gpu_facts) does.
    assert stack_of("onnxruntime-1.32.0", Versions(compiler="onnxruntime-1.32.0"), {"driver": "570.86"}).wire() == {
        "driverMajor": "570",
        "compiler": "onnxruntime",
        "compilerVersion": "onnxruntime-1.32.0",
    }


def test_a_new_stack_marks_the_older_entries_of_its_gpu_superseded_and_keeps_them():
    old, other_gpu = index_entry("old", driver="535"), index_entry("l40s", gpu="NVIDIA-L40S", driver="535")
    new = index_entry("new", day="20", driver="550")
    kept = superseded([old, other_gpu], new)
    assert [e["runUid"] for e in kept] == ["old", "l40s"]
    assert kept[0]["supersededBy"] == {"run": "ns/new", "runUid": "new", "folder": new["folder"], "stack": new["stack"]}
    assert "supersededBy" not in kept[1]  # another GPU type: not superseded
    assert IndexEntry.model_validate(kept[0]).superseded_by.stack.driver_major == "550"


def test_the_same_stack_is_left_as_before_and_a_mark_is_kept():
    same = index_entry("same", driver="550")
    assert superseded([same], index_entry("new", day="20", driver="550")) == [same]
    first = superseded([index_entry("a", driver="535")], index_entry("b", day="15", driver="545"))
    again = superseded(first, index_entry("c", day="20", driver="550"))
    assert again[0]["supersededBy"]["runUid"] == "b"  # the chain a -> b stays; b's own mark comes with b


def test_a_newer_entry_of_the_superseding_stack_takes_the_mark_over():
    # A policy's re-measure publishes for driver 560 (it kept the default), then its full re-tune does:
    # the 550 entry's mark names the re-tune's entry, the one a consumer on 560 is now handed.
    old = index_entry("first", driver="550")
    check = index_entry("check", day="15", driver="560")
    [old] = superseded([old], check)
    full = index_entry("full", day="20", driver="560")
    marked = superseded([old, check], full)
    assert marked[0]["supersededBy"]["runUid"] == "full" and marked[0]["supersededBy"]["folder"] == full["folder"]
    assert "supersededBy" not in marked[1]  # the same stack: left to selection
    assert superseded(marked, full) == marked  # publishing the re-tune again changes nothing
    # A publication older than the marked entry (a retried pass) does not take the mark back.
    assert superseded(marked[:1] + [full], check)[0]["supersededBy"]["runUid"] == "full"


def test_a_new_compiler_version_or_cuda_is_another_stack():
    new = index_entry("new", day="20")
    assert superseded([index_entry("t", version="inductor-torch-2.8.0+cu128-triton-3.4.0")], new)[0]["supersededBy"]
    assert superseded([index_entry("c", cuda="12.6")], new)[0]["supersededBy"]


def test_an_entry_without_a_stack_is_told_apart_by_its_compiler_version_only():
    legacy = {k: v for k, v in index_entry("legacy").items() if k != "stack"}
    assert entry_stack(legacy).compiler_version == TORCH and entry_stack(legacy).driver_major is None
    assert same_stack(entry_stack(legacy), entry_stack(index_entry("new", driver="550")))
    assert superseded([legacy], index_entry("new", day="20")) == [legacy]
    assert superseded([legacy], index_entry("new", day="20", version="inductor-torch-2.10.0+cu128-triton-3.5.0"))[0][
        "supersededBy"
    ]


def offers_for_two_drivers() -> list[Offer]:
    old = index_entry("old", driver="535")
    new = index_entry("new", day="20", driver="550")
    [old] = superseded([old], new)
    provenance = {"compiler": {"versions": {"cuda": "12.8"}}}
    return [Offer.from_catalog(old, provenance), Offer.from_catalog(new, provenance)]


def consumer(driver):
    return Consumer("NVIDIA-H200", "9.0", {"inductor": INDUCTOR}, driver)


def test_fetch_chooses_the_entry_of_the_consumers_driver_a_superseded_one_for_its_own_stack():
    offers = offers_for_two_drivers()
    on_550 = select(offers, consumer("550"), model="m")
    assert on_550.offer.run_uid == "new" and "on driver major 550" in on_550.how
    on_535 = select(offers, consumer("535"), model="m")
    assert on_535.offer.run_uid == "old" and "on driver major 535" in on_535.how
    assert "superseded by run ns/new" in on_535.how and "still the engine for its own stack" in on_535.how
    assert select(offers, consumer(None), model="m").offer.run_uid == "new"  # no driver given: newest, as before


def test_no_entry_on_the_consumers_driver_falls_back_and_says_so_or_refuses():
    offers = offers_for_two_drivers()
    fallback = select(offers, consumer("560"), model="m")
    assert fallback.offer.run_uid == "new"
    assert "no compatible engine was measured on driver major 560" in fallback.how and "535, 550" in fallback.how
    with pytest.raises(NoCompatibleEngine) as refused:
        select(offers, consumer("560"), model="m", same_driver=True)
    text = str(refused.value)
    assert "driver major 560" in text  # what was wanted
    assert "driver 535" in text and "driver 550" in text and "superseded by run ns/new" in text  # what is held


def test_a_consumer_with_an_older_compiler_gets_the_entry_built_by_it():
    old = index_entry("old", version="inductor-torch-2.8.0+cu128-triton-3.4.0", driver="535")
    new = index_entry("new", day="20")
    [old] = superseded([old], new)
    offers = [Offer.from_catalog(old), Offer.from_catalog(new)]
    older = Consumer("NVIDIA-H200", "9.0", {"inductor": Installed(old["compilerVersion"], "12.8")}, "550")
    chosen = select(offers, older, model="m")
    assert chosen.offer.run_uid == "old" and "no compatible engine was measured on driver major 550" in chosen.how


def test_an_index_entry_without_a_stack_reads_its_driver_from_the_provenance():
    legacy = {k: v for k, v in index_entry("legacy").items() if k != "stack"}
    read = Offer.from_catalog(legacy, {"compiler": {"versions": {"cuda": "12.8", "driver": "535.104.05"}}})
    assert (read.driver_major, read.cuda, read.superseded_by) == ("535", "12.8", None)
    assert Offer.from_catalog(legacy, {"gpu": {"driver": "570.86"}}).driver_major == "570"
    assert Offer.from_catalog(legacy).driver_major is None


def test_catalog_list_shows_each_entrys_driver_and_supersession():
    data = coverage("m", offers_for_two_drivers())
    [cell] = data["cells"]
    assert [(e["runUid"], e["driverMajor"]) for e in cell["entries"]] == [("new", "550"), ("old", "535")]
    assert cell["entries"][0]["supersededBy"] is None and "run ns/new" in cell["entries"][1]["supersededBy"]
    assert "(+1) driver 535/550" in render_table(data)
