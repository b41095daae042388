"""A CUDA engine whose build tuned its kernels at run time (coordinate descent) brings the configs it
chose, so a fresh process that loads it tunes nothing again and serves the config its build measured:
every load of the MLP's coordinate-descent route on an H100 tuned again, 2.5 s of its 2.6 s load
(session 33, `bench/first_call_profile.py`). The kernels come back from the caches as the build
pickled them (static launcher), looking for their configs in the build's folder, and torch 2.9-2.11
adopt none for a kernel compiled for one config, so the load descended again (Triton compiled 9
kernels in one such load on an H100, session 35); the load now serves the build's configs
(`_serve_tuned_configs`). On an H100 it then descended no more, but Triton still compiled the tuned
config's kernel once (session 37): torch names its own ptxas to Triton only where it compiles a kernel
itself, so the load's key missed the build's kernel; build and load now both name it
(`_compile_with_torchs_tools`; on an H100 the load then compiled none, session 38). The control: the
same engine loaded with torch's own lookup (`_serve_tuned_configs` off) tunes again. All of it passed
on an H100 at `dd99ba5` (session 41, `docs/benchmarks/raw/s41/call1/`): the load served the build's
config (XBLOCK 1024, 8 warps) and compiled nothing; torch's own lookup descended again, to 4 warps,
compiling 3 kernels: without the fix the engine served is not the one measured. The packing
and placing: tests/unit/test_an_engine_brings_what_its_build_tuned.py; the adoption:
tests/unit/test_a_loaded_kernel_serves_the_config_its_build_tuned.py."""

import io
import json
import shutil
import tarfile

import numpy as np
import pytest

from tests.gpu.fresh_load import export_mlp, load_fresh

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="Triton kernels' run-time tuning needs CUDA"),
    pytest.mark.usefixtures("caches_restored"),  # (tests/gpu/conftest.py)
]


def test_a_tuned_engine_loads_without_tuning_again(tmp_path):
    from enginewright.backends.base import BuildRequest
    from enginewright.backends.inductor import CONFIG_BOOKKEEPING, InductorBackend, tuned_configs

    name, x, reference = export_mlp(tmp_path, device="cuda", rows=256, hidden=1024, outputs=256)
    request = BuildRequest(model_path=tmp_path / "model.pt2", workdir=tmp_path / "build", sample_inputs={name: x})
    engine = InductorBackend(device="cuda").build(request, {"coordinate_descent_tuning": "true"})
    with tarfile.open(fileobj=io.BytesIO(engine)) as tar:
        configs = [n for n in tar.getnames() if n.endswith(".best_config")]
        tuned = [json.loads(tar.extractfile(n).read()) for n in configs]
    assert configs, "the build tuned no kernel at run time: this test would show nothing"

    (tmp_path / "engine.tar").write_bytes(engine)
    # as on another host: nothing of the build's folders is left to find (Triton's index of a kernel's
    # files names them by absolute path; a copied index would have pointed at the build's)
    shutil.rmtree(tmp_path / "build")
    loaded = load_fresh(tmp_path / "engine.tar", tmp_path / "load", tmp_path / "inputs.npz", device="cuda")
    assert loaded["describe"]["tuned_here"] == 0, loaded["describe"]
    assert loaded["describe"]["tuned_placed"] == len(configs), loaded["describe"]
    descended = sum(best.get("found_by_coordesc") is True for best in tuned)
    assert loaded["describe"]["tuned_by_descent"] == descended > 0, loaded["describe"]  # what provenance reads
    # what bench/parallel_build_effect.py compares across builds: each config as built, no bookkeeping
    assert tuned_configs(engine) == {
        name.removeprefix("autotuned/inductor/"): {k: v for k, v in best.items() if k not in CONFIG_BOOKKEEPING}
        for name, best in zip(configs, tuned, strict=True)
    }
    missed = {key: loaded[key] for key in ("triton_compiled", "triton_compiled_kernels", "triton_misses", "descended")}
    assert loaded["descended"] == [], missed  # it served the build's configs, not tuned ones of its own
    assert loaded["triton_compiled"] == 0, missed  # the tuned kernels came with it
    # and each kernel its build tuned serves the config the build measured, marked as found by descent
    served = [{**k["config"], "kernel": k["kernel"]} for k in loaded["served"]]
    for best in tuned:
        chosen = {k: v for k, v in best.items() if k not in ("configs_hash", "time_taken_ms", "triton_cache_hash")}
        assert any(chosen.items() <= got.items() for got in served), (best, served)
    np.testing.assert_allclose(np.array(loaded["output"]), reference, rtol=1e-3, atol=1e-3)

    # The same engine loaded with torch's own lookup of the tuned config (as loads were before
    # 9c0757c): the kernel looks in its build's folder, finds nothing and tunes again.
    before = load_fresh(tmp_path / "engine.tar", tmp_path / "load-before", tmp_path / "inputs.npz", "cuda", False, True)
    assert before["descended"], {k: before[k] for k in ("descended", "served", "triton_compiled")}
