"""An Inductor engine built for the host (CPU) carries the libraries its build compiled, so a fresh
process that loads it compiles no C++: the portable caches hold only the source, and every serving
process (each batch's, the confirmation's, a consumer's) compiled it again before its first answer
(~8 s for a 15 ms MLP, 1.4 s with the libraries). CUDA engines carry none (their Triton kernels are in
the portable caches): skipped there."""

import io
import json
import tarfile

import numpy as np
import pytest

from tests.gpu.fresh_load import export_mlp, load_fresh

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.skipif(torch.cuda.is_available(), reason="host engines only"),
    pytest.mark.usefixtures("caches_restored"),  # (tests/gpu/conftest.py)
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory, caches_restored):
    from enginewright.backends.base import BuildRequest
    from enginewright.backends.inductor import InductorBackend

    folder = tmp_path_factory.mktemp("host-engine")
    name, x, reference = export_mlp(folder)
    request = BuildRequest(model_path=folder / "model.pt2", workdir=folder / "build", sample_inputs={name: x})
    return InductorBackend(device="cpu").build(request, {}), folder, reference


def load_in_a_fresh_process(engine: bytes, folder, name: str) -> dict:
    (folder / f"{name}.tar").write_bytes(engine)
    return load_fresh(folder / f"{name}.tar", folder / f"load-{name}", folder / "inputs.npz")


def rewritten(engine: bytes, keep=lambda member: True, settings=None, extra=()) -> bytes:
    """The engine's tar with members left out (`keep`), settings.json changed, members added."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(engine)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src.getmembers():
            if not keep(member):
                continue
            data = src.extractfile(member).read()
            if member.name == "settings.json" and settings:
                data = json.dumps({**json.loads(data), **settings}).encode()
            info = tarfile.TarInfo(member.name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
        for info in extra:
            dst.addfile(info)
    return out.getvalue()


def without_libraries(engine: bytes) -> bytes:
    return rewritten(engine, keep=lambda member: not member.name.startswith("compiled/"))


def test_a_fresh_process_loads_a_host_engine_without_compiling(engine):
    built, folder, reference = engine
    with tarfile.open(fileobj=io.BytesIO(built)) as tar:
        libraries = [n for n in tar.getnames() if n.startswith("compiled/")]
    assert libraries and all(n.endswith((".so", ".so.load_ok")) for n in libraries), libraries

    loaded = load_in_a_fresh_process(built, folder, "with")
    assert loaded["compiled"] == 0, loaded["built"]
    assert loaded["probe_loads"] == 0  # the probes' markers came along: no subprocess checks them again
    assert loaded["describe"]["fxgraph_cache_miss"] == 0 and loaded["describe"]["fxgraph_cache_hit"] >= 1
    np.testing.assert_allclose(np.array(loaded["output"]), reference, rtol=1e-4, atol=1e-5)

    # The same engine without them is what every engine was: its source compiled again on load.
    bare = load_in_a_fresh_process(without_libraries(built), folder, "without")
    assert bare["compiled"] > 0
    np.testing.assert_allclose(np.array(bare["output"]), reference, rtol=1e-4, atol=1e-5)


def test_a_load_times_its_parts(engine, tmp_path):
    """The backend's `load` says where its time went (the tar, the compile caches, the program), so a
    profile can split a load's seconds (0.49 s a later load on an H100, 34 loads in a run)."""
    import time

    from enginewright.backends.inductor import InductorBackend

    built, _, _ = engine
    began = time.monotonic()
    runner = InductorBackend(device="cpu").load(built, tmp_path / "load")
    took = time.monotonic() - began
    try:
        assert set(runner.load_parts) == {"unpack", "caches", "program"}
        assert all(s >= 0 for s in runner.load_parts.values()) and runner.load_parts["program"] > 0
        assert sum(runner.load_parts.values()) <= took + 0.002  # parts of it, each rounded
    finally:
        runner.close()


def test_libraries_are_used_only_on_a_host_like_the_one_that_compiled_them(engine):
    """`-march=native` and a compiler command that names neither the CPU nor the compiler's version:
    a library built on a newer CPU could crash an older one, so another host compiles its own."""
    built, folder, reference = engine
    with tarfile.open(fileobj=io.BytesIO(built)) as tar:
        host = json.loads(tar.extractfile("settings.json").read())["host_code"]
    assert host
    elsewhere = load_in_a_fresh_process(rewritten(built, settings={"host_code": "another-host"}), folder, "elsewhere")
    assert elsewhere["compiled"] > 0
    np.testing.assert_allclose(np.array(elsewhere["output"]), reference, rtol=1e-4, atol=1e-5)


def test_only_regular_files_named_as_inductor_names_them_are_placed(engine, tmp_path):
    """A link or an odd path under compiled/ is not followed or written anywhere."""
    from enginewright.backends.inductor import InductorBackend

    built, folder, _ = engine
    link = tarfile.TarInfo("compiled/ab/link.so")
    link.type, link.linkname = tarfile.SYMTYPE, "../../program.pt2"
    odd = tarfile.TarInfo("compiled/../../escape.so")
    workdir = tmp_path / "load"
    InductorBackend(device="cpu").load(rewritten(built, extra=[link, odd]), workdir).close()
    placed = sorted(p.relative_to(workdir / "caches-load" / "inductor").as_posix() for p in workdir.rglob("*.so"))
    assert placed and "ab/link.so" not in placed and not (tmp_path / "escape.so").exists()
    assert not any((workdir / "caches-load" / "inductor" / p).is_symlink() for p in placed)
    assert not (workdir / "compiled").exists()  # nothing of it extracted beside the program


BUILT_AFTER_A_PROBE = """
import os, sys
from pathlib import Path
import numpy as np
from torch._inductor import cpu_vec_isa
from enginewright.backends.base import BuildRequest
from enginewright.backends.inductor import InductorBackend

folder = Path(sys.argv[1])
os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder / "elsewhere")  # a compile outside the backend
cpu_vec_isa.valid_vec_isa_list()
inputs = dict(np.load(folder / "inputs.npz"))
request = BuildRequest(model_path=folder / "model.pt2", workdir=folder / "build", sample_inputs=inputs)
(folder / "engine.tar").write_bytes(InductorBackend(device="cpu").build(request, {}))
"""


def test_an_engine_built_where_the_probes_ran_elsewhere_loads_without_compiling(tmp_path):
    """Inductor keeps its probes' answer (which vector instructions the CPU has) for the process's
    life, their libraries only in the cache folder they ran in: an engine built in a process that
    had probed elsewhere (another test's build, a load, any compile) shipped without them, and its
    fresh load compiled them again."""
    import subprocess
    import sys

    name, x, reference = export_mlp(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", BUILT_AFTER_A_PROBE, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    probes = {f"compiled/{p.relative_to(elsewhere).as_posix()}" for p in elsewhere.glob("*/*.so")}
    assert probes, "the probes ran elsewhere first (the test's premise)"
    with tarfile.open(tmp_path / "engine.tar") as tar:
        assert probes <= set(tar.getnames())  # the same libraries, by the names a fresh process looks for
    loaded = load_fresh(tmp_path / "engine.tar", tmp_path / "load", tmp_path / "inputs.npz")
    assert loaded["compiled"] == 0, loaded["built"]
    np.testing.assert_allclose(np.array(loaded["output"]), reference, rtol=1e-4, atol=1e-5)
