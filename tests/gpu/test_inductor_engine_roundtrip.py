"""The Inductor backend builds a route, saves the engine, and reloads and runs it in a fresh process
without re-tuning (compile-cache hits, no misses); the eager route (`compile=false`) goes through the
same tune and loads without compiling. Runs on CUDA when present, else on CPU; skipped where torch is
not installed (CI installs no torch: see README)."""

import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inductor")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 32)).to(device).eval()
    exported = torch.export.export(model, (torch.zeros(16, 64, device=device),))
    names = [
        s.arg.name
        for s in exported.graph_signature.input_specs
        if s.kind == torch.export.graph_signature.InputKind.USER_INPUT
    ]
    assert len(names) == 1
    torch.export.save(exported, str(folder / "model.pt2"))
    rng = np.random.default_rng(0)
    for i in range(2):
        x = rng.standard_normal((16, 64)).astype(np.float32)
        with torch.no_grad():
            ref = model(torch.from_numpy(x).to(device)).cpu().numpy()
        np.savez(folder / f"inputs-{i}.npz", **{names[0]: x})
        np.savez(folder / f"references-{i}.npz", output=ref)
    return folder, device


def test_knobs_are_discovered_from_the_installed_torch(program):
    from enginewright.backends.inductor import InductorBackend

    knobs = {k.name: k for k in InductorBackend(device=program[1]).knobs()}
    assert "epilogue_fusion" in knobs and knobs["epilogue_fusion"].values == ("false", "true")
    assert ("triton.cudagraphs" in knobs) == (program[1] == "cuda")
    assert knobs["compile"].values == ("true", "false") and knobs["compile"].exclusive


def test_tune_builds_reloads_in_a_fresh_process_and_hits_the_compile_cache(program, tmp_path):
    folder, device = program
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "enginewright",
        "tune",
        str(folder / "model.pt2"),
        "--backend",
        "inductor",
        "--device",
        device,
        "--inputs",
        str(folder / "inputs-0.npz"),
        "--inputs",
        str(folder / "inputs-1.npz"),
        "--references",
        str(folder / "references-0.npz"),
        "--references",
        str(folder / "references-1.npz"),
        "--metric",
        "cosine",
        "--threshold",
        "1e-4",
        "--knob",
        "epilogue_fusion=false",
        "--knob",
        "compile=false",
        "--no-confirm",
        "--warmup",
        "2",
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    entries = [json.loads(p.read_text()) for p in (out / "store/runs/local/entries").glob("*.json")]
    assert sorted(json.dumps(e["knobs"], sort_keys=True) for e in entries) == [
        '{"compile": "false"}',
        '{"epilogue_fusion": "false"}',
        "{}",
    ]
    for entry in entries:
        assert entry["outcome"] == "ok", entry.get("error")
        if entry["knobs"].get("compile") == "false":
            assert entry["loadInfo"]["compiled"] == 0  # served eagerly: nothing compiled, no cache
        else:
            assert entry["loadInfo"]["compiled"] == 1
            assert entry["loadInfo"]["fxgraph_cache_hit"] >= 1
            assert entry["loadInfo"]["fxgraph_cache_miss"] == 0  # loaded, not re-compiled from scratch
        assert entry["versions"]["compiler"].startswith("inductor-torch-")
        assert max(entry["loss"].values()) < 1e-4


def test_the_served_program_carries_none_of_exports_per_call_hooks(program):
    """torch.export's module() hooks every call (an input check, and a forward hook that sends each
    call down nn.Module's slow path: ~10 us a call on CPU); the engine's flat program has none and
    gives the same outputs."""
    from pathlib import Path

    from enginewright.backends.inductor import _flat_program

    folder, device = program
    exported = torch.export.load(str(folder / "model.pt2")).module()
    assert exported._forward_hooks and exported._forward_pre_hooks  # what export gives (the test's premise)
    flat, names, structured = _flat_program(torch, Path(folder / "model.pt2"), device)
    assert not flat._forward_hooks and not flat._forward_pre_hooks and not flat._forward_hooks_always_called
    x = torch.from_numpy(np.load(folder / "inputs-0.npz")[names[0]]).to(device)
    with torch.no_grad():
        assert torch.equal(structured(flat(x)), exported(x))
