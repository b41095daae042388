"""What crosses a process or the store (api.contracts) reads back as it was written: the probe's
knobs keep `exclusive` (the flow then never combines compile=false with other knobs), confirmation
rounds keep their opaque keys, and the catalog's index entry and provenance read back field by field."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from enginewright.api.cache import Versions
from enginewright.api.contracts import BatchRequest, ConfirmationResult, IndexEntry, KnobInfo, ProbeResult, Provenance
from enginewright.api.routes import Knob
from enginewright.catalog.compatibility import Offer
from enginewright.search.flow import FlowSpec, Observed, RunBatches, next_step

EAGER = Knob("compile", ("true", "false"), "true", "false: run the program eagerly", exclusive=True)
FREEZING = Knob("freezing", ("false", "true"), "false")
PADDING = Knob("shape_padding", ("false", "true"), "false")


def probe_json(*knobs: Knob) -> bytes:
    return (
        ProbeResult(
            ok=True,
            knobs=[KnobInfo.of(k) for k in knobs],
            versions=Versions(compiler="inductor-torch-x"),
            model_sha256="ab" * 32,
            model_size=10,
            input_shapes={"x": [2, 8]},
            engine_suffix=".tar",
        )
        .model_dump_json(by_alias=True)
        .encode()
    )


def test_probe_knobs_keep_exclusive_and_full_search_never_combines_the_eager_route():
    knobs = ProbeResult.model_validate_json(probe_json(EAGER, FREEZING, PADDING)).compiler_knobs()
    assert knobs == [EAGER, FREEZING, PADDING]
    step = next_step(
        FlowSpec(mode="full", knobs=(("compile", ("false",)), ("freezing", ("true",)), ("shape_padding", ("true",)))),
        Observed(knobs, {}),
    )
    assert isinstance(step, RunBatches)
    routes = [dict(r.knobs) for b in step.batches for r in b.routes]
    assert {"compile": "false"} in routes
    assert not [r for r in routes if "compile" in r and len(r) > 1], routes
    assert {"freezing": "true", "shape_padding": "true"} in routes  # the other knobs are still combined


def test_probe_written_before_the_contract_still_reads():
    old = {
        "ok": True,
        "knobs": [{"name": "a", "values": ["0", "1"], "default": "0", "help": ""}],
        "versions": {"compiler": "onnxruntime-1.2"},
        "model_sha256": "cd" * 32,
        "model_size": 3,
        "input_shapes": {},
        "engine_suffix": ".ort.tar",
        "data_sha256": {},
    }
    probe = ProbeResult.model_validate_json(json.dumps(old))
    assert probe.compiler_knobs() == [Knob("a", ("0", "1"), "0")]
    assert probe.model_sha256 == "cd" * 32


def test_a_probe_with_a_misspelt_field_is_refused():
    with pytest.raises(ValidationError, match="exclusiv"):
        ProbeResult.model_validate_json(
            json.dumps(
                {
                    "ok": True,
                    "knobs": [{"name": "compile", "values": ["true", "false"], "default": "true", "exclusiv": True}],
                }
            )
        )


def test_confirmation_rounds_keep_opaque_keys():
    rounds = {"0123456789ab": [1.0, 1.1], "0123456789ab@2": [1.2, 1.0], "ffffffffffff": [0.9, 0.8]}
    result = ConfirmationResult(batch="confirm-1", rounds=rounds)
    back = ConfirmationResult.model_validate_json(result.model_dump_json(by_alias=True))
    assert back.rounds == rounds and back == result


def test_batch_request_round_trip(tmp_path):
    import yaml

    from enginewright.api.models import TuningRunSpec

    spec = TuningRunSpec.model_validate(yaml.safe_load(open("examples/tuningrun-onnx-fast.yaml"))["spec"])
    request = BatchRequest(
        target="cpu",
        stage="stage1",
        batch="stage1-b000",
        bucket="b",
        prefix="runs/x",
        routes=["-a=1"],
        default_route="",
        deadline=12.5,
        spec=spec,
    )
    assert BatchRequest.model_validate_json(json.dumps(request.wire())) == request


def test_index_entry_and_provenance_read_back_and_ignore_fields_a_newer_writer_added():
    entry = IndexEntry(
        gpu_product="cpu",
        compiler_version="inductor-torch-2",
        folder="catalog/m/f",
        engine="s3://b/catalog/m/f/engine.tar",
        sha256="1" * 64,
        run_uid="u",
        run="ns/r",
        published_at="2026-12-01T00:00:00Z",
        speedup=1.3,
        confirmed=True,
    )
    wire = {**entry.wire(), "addedLater": 1}
    assert IndexEntry.model_validate(wire) == entry
    offer = Offer.from_catalog(wire)
    assert (offer.gpu_product, offer.run_uid, offer.speedup, offer.confirmed) == ("cpu", "u", 1.3, True)
    with pytest.raises(ValidationError, match="sha256"):
        IndexEntry.model_validate({k: v for k, v in wire.items() if k != "sha256"})
    doc = {
        "schema": "enginewright.io/provenance/v1",
        "engine": {"uri": entry.engine, "sha256": entry.sha256, "size": 4},
        "model": {"uri": "s3://b/m.pt2", "format": "pt2", "name": "m", "inputShapes": {"x": [2, 8]}},
        "accuracy": {"disabled": False, "metric": "cosine", "threshold": 1e-3, "lossPerOutput": {"output": 0.0}},
        "route": {"id": "abc", "route": "-compile=false", "knobs": {"compile": "false"}},
        "compiler": {"name": "inductor", "versions": {"compiler": "inductor-torch-2"}},
        "gpu": {"product": "cpu", "node": "n1"},
        "timing": {"objective": "latency", "speedup": 1.3, "speedupName": "latency speedup", "confirmed": True},
        "search": {"mode": "mixed", "routesPlanned": 4, "routesMeasured": 4},
        "run": {"namespace": "ns", "name": "r", "uid": "u", "target": "cpu"},
        "operatorVersion": "0.1.0",
        "publishedAt": "2026-12-01T00:00:00Z",
        "newSection": {},
    }
    provenance = Provenance.model_validate(doc)
    assert provenance.route.knobs == {"compile": "false"} and provenance.engine.sha256 == entry.sha256
    assert Provenance.model_validate(provenance.model_dump(mode="json", by_alias=True)) == provenance


def test_the_controller_does_not_import_the_worker():
    import subprocess
    import sys

    code = (
        "import importlib, pkgutil, sys, enginewright.controller as c; "
        "[importlib.import_module(f'{c.__name__}.{m.name}') for m in pkgutil.iter_modules(c.__path__) "
        "if m.name != '__main__']; "
        "print(sorted(m for m in sys.modules if m.startswith('enginewright.worker')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
