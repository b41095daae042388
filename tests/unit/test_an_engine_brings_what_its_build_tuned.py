"""An Inductor engine carries what its build tuned at run time, and a load puts it where Inductor and
Triton look before they tune: a kernel's `.best_config` (coordinate descent, or the best of several
configs) lives beside the kernel's source in the build's cache folder, and torch 2.11's portable
caches leave it out, so every load of the MLP's coordinate-descent route tuned its kernels again (2.5 s
a load on an H100, session 33) and served a config of that load's own. The files' layout here is
Inductor's and Triton's (`<cache>/inductor/<2 chars>/<key>.best_config`, `<cache>/triton/<hash>/<files>`);
the GPU side (a CUDA build that tuned, loaded without tuning again) is
tests/gpu/test_a_tuned_engine_loads_without_tuning_again.py."""

import io
import json
import tarfile

import pytest

from enginewright.backends.inductor import _autotuned, _place_autotuned


def best_config(folder, name: str, **fields) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"XBLOCK": 256, "num_warps": 4, "found_by_coordesc": True, **fields}))


def triton_kernel(caches, key: str) -> None:
    """A kernel's folder as Triton writes it: its files, and its index naming each by absolute path."""
    folder = caches / "triton" / key
    folder.mkdir(parents=True)
    (folder / "triton_poi_fused_0.cubin").write_bytes(b"cubin " + key.encode())
    (folder / "triton_poi_fused_0.json").write_text("{}")
    paths = {name: str(folder / name) for name in ("triton_poi_fused_0.cubin", "triton_poi_fused_0.json")}
    (folder / "__grp__triton_poi_fused_0.json").write_text(json.dumps({"child_paths": paths}))


def tar_bytes(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


def as_tar(members: dict[str, bytes], links: dict[str, str] | None = None) -> tarfile.TarFile:
    return tarfile.open(fileobj=io.BytesIO(tar_bytes(members, links)), mode="r")


def test_a_build_that_tuned_nothing_brings_nothing(tmp_path):
    triton_kernel(tmp_path, "ABC")
    (tmp_path / "inductor" / "ab").mkdir(parents=True)
    (tmp_path / "inductor" / "ab" / "cabc.py").write_text("# a kernel's source")
    assert _autotuned(tmp_path) == {}


def test_the_configs_come_with_the_kernels_they_name(tmp_path):
    best_config(tmp_path / "inductor" / "xy", "k1.best_config", triton_cache_hash="KEEP")
    best_config(tmp_path / "inductor" / "zw", "k2.best_config", triton_cache_hash="ALSO")
    for key in ("KEEP", "ALSO", "TRIED"):  # TRIED: a config coordinate descent tried and left
        triton_kernel(tmp_path, key)
    (tmp_path / "triton" / "KEEP" / "triton_poi_fused_0.so").write_bytes(b"\x7fELF")  # a launcher: this host's
    found = _autotuned(tmp_path)
    assert sorted(found) == [
        "autotuned/inductor/xy/k1.best_config",
        "autotuned/inductor/zw/k2.best_config",
        "autotuned/triton/ALSO/__grp__triton_poi_fused_0.json",
        "autotuned/triton/ALSO/triton_poi_fused_0.cubin",
        "autotuned/triton/ALSO/triton_poi_fused_0.json",
        "autotuned/triton/KEEP/__grp__triton_poi_fused_0.json",
        "autotuned/triton/KEEP/triton_poi_fused_0.cubin",
        "autotuned/triton/KEEP/triton_poi_fused_0.json",
    ]
    assert found["autotuned/triton/KEEP/triton_poi_fused_0.cubin"] == b"cubin KEEP"
    # the index names the files, not the build's folder (which means nothing where the engine loads)
    assert json.loads(found["autotuned/triton/KEEP/__grp__triton_poi_fused_0.json"]) == {
        "child_paths": {
            "triton_poi_fused_0.cubin": "triton_poi_fused_0.cubin",
            "triton_poi_fused_0.json": "triton_poi_fused_0.json",
        }
    }
    assert str(tmp_path).encode() not in b"".join(found.values())


def test_configs_that_name_no_kernel_bring_every_kernel_the_build_compiled(tmp_path):
    best_config(tmp_path / "inductor" / "xy", "k1.best_config")  # torch 2.11 writes no triton_cache_hash
    for key in ("ONE", "TWO"):
        triton_kernel(tmp_path, key)
    (tmp_path / "triton" / "UTILS").mkdir()
    (tmp_path / "triton" / "UTILS" / "cuda_utils.cpython-312-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    kernels = [n for n in _autotuned(tmp_path) if n.startswith("autotuned/triton/")]
    assert {n.split("/")[2] for n in kernels} == {"ONE", "TWO"}  # not Triton's own host module


def test_a_load_places_them_where_inductor_and_triton_look(tmp_path):
    build, load = tmp_path / "build", tmp_path / "load"
    best_config(build / "inductor" / "xy", "k1.best_config", triton_cache_hash="KEEP")
    triton_kernel(build, "KEEP")
    packed = _autotuned(build)
    placed = _place_autotuned(as_tar({"program.pt2": b"p", **packed}), load)
    assert list(placed) == ["xy/k1.best_config"]
    assert (load / "inductor" / "xy" / "k1.best_config").read_bytes() == (
        build / "inductor" / "xy" / "k1.best_config"
    ).read_bytes()
    assert (load / "triton" / "KEEP" / "triton_poi_fused_0.cubin").read_bytes() == b"cubin KEEP"
    assert sorted(p.relative_to(load).as_posix() for p in load.rglob("*") if p.is_file()) == [
        "inductor/xy/k1.best_config",
        "triton/KEEP/__grp__triton_poi_fused_0.json",
        "triton/KEEP/triton_poi_fused_0.cubin",
        "triton/KEEP/triton_poi_fused_0.json",
    ]
    # Triton finds the kernel's files where the load placed them, not in the build's folder
    index = json.loads((load / "triton" / "KEEP" / "__grp__triton_poi_fused_0.json").read_text())
    folder = load / "triton" / "KEEP"
    assert index == {
        "child_paths": {n: str(folder / n) for n in ("triton_poi_fused_0.cubin", "triton_poi_fused_0.json")}
    }


def test_an_engine_cannot_place_a_file_anywhere_else(tmp_path):
    """A tampered engine's members that climb out of the cache folders, or are links, or are named
    as neither Inductor nor Triton names its files, are not placed."""
    load, outside = tmp_path / "load", tmp_path / "outside"
    hostile = {
        "autotuned/inductor/../../outside/x.best_config": b"{}",
        "autotuned/inductor/xy/../../../outside/y.best_config": b"{}",
        "autotuned/triton/../outside/kernel.cubin": b"x",
        "autotuned/triton/KEY/../../../outside/z": b"x",
        "autotuned/triton/KEY/..": b"x",
        "autotuned/triton/KEY/sub/deeper.cubin": b"x",
        "autotuned/inductor/k.best_config": b"{}",  # not beside a kernel's folder
        "autotuned/inductor/xy/k.py": b"import os",  # a kernel's source is the portable caches' to write
        "autotuned/triton/KEY/cuda_utils.cpython-312-x86_64-linux-gnu.so": b"\x7fELF",  # host code
        "autotuned/triton/KEY/launcher.so": b"\x7fELF",
    }
    links = {"autotuned/inductor/xy/link.best_config": "/etc/passwd", "autotuned/triton/KEY/l.cubin": "/etc/passwd"}
    assert _place_autotuned(as_tar(hostile, links), load) == {}
    assert not outside.exists()
    assert not load.exists() or not any(load.rglob("*"))


def test_a_file_already_there_is_left_as_it_is(tmp_path):
    load = tmp_path / "load"
    triton_kernel(load, "KEEP")  # as the portable caches placed it
    before = (load / "triton" / "KEEP" / "triton_poi_fused_0.cubin").read_bytes()
    _place_autotuned(as_tar({"autotuned/triton/KEEP/triton_poi_fused_0.cubin": b"other"}), load)
    assert (load / "triton" / "KEEP" / "triton_poi_fused_0.cubin").read_bytes() == before


def test_a_kernel_index_that_names_other_paths_names_only_the_load_s_files(tmp_path):
    """A tampered index that points Triton at files elsewhere (or at a library) keeps only plain file
    names, placed in the kernel's own folder."""
    index = {
        "child_paths": {
            "k.cubin": "/etc/passwd",
            "../../x": "/x",
            "/abs": "/abs",
            "k.so": "/tmp/k.so",
            "k.json": "k.json",
        }
    }
    tar = as_tar({"autotuned/triton/KEY/__grp__k.json": json.dumps(index).encode()})
    _place_autotuned(tar, tmp_path)
    folder = tmp_path / "triton" / "KEY"
    assert json.loads((folder / "__grp__k.json").read_text()) == {
        "child_paths": {"k.cubin": str(folder / "k.cubin"), "k.json": str(folder / "k.json")}
    }


def test_a_load_extracts_only_the_engine_s_own_files(tmp_path):
    """Members beside the engine's three files are placed by name or not at all: a tampered engine's
    member named into the load's cache folders (a library, a kernel's source) is not extracted there,
    past the checks the placing makes. The engine's program is junk, so the load fails after that."""
    pytest.importorskip("torch")
    from enginewright.backends.inductor import InductorBackend

    members = {
        "program.pt2": b"not a program",
        "caches.bin": b"",
        "settings.json": json.dumps({"options": {}, "device": "cpu"}).encode(),
        "caches-load/triton/KEY/cuda_utils.so": b"\x7fELF",
        "caches-load/inductor/ab/cabc.py": b"import os",
        "notes.txt": b"x",
    }
    buffer = io.BytesIO()
    with as_tar(members) as tar, tarfile.open(fileobj=buffer, mode="w") as out:
        for member in tar.getmembers():
            out.addfile(member, tar.extractfile(member))
    with pytest.raises(Exception):
        InductorBackend(device="cpu").load(buffer.getvalue(), tmp_path / "load")
    written = sorted(p.relative_to(tmp_path / "load").as_posix() for p in (tmp_path / "load").rglob("*") if p.is_file())
    assert written == ["caches.bin", "program.pt2", "settings.json"], written


def test_an_engines_tuned_configs_are_read_as_its_build_chose_them(tmp_path):
    """What provenance and bench/parallel_build_effect.py compare across builds of one route: each
    kernel's config by its path, how it was chosen, and none of Inductor's bookkeeping; a member that
    is not a config where a load would place one (a link, another path, not a JSON object) is none."""
    from enginewright.backends.inductor import tuned_configs

    config = {"XBLOCK": 1024, "num_warps": 8, "num_stages": 1, "found_by_coordesc": True}
    bookkeeping = {"configs_hash": "3ca5", "time_taken_ms": 694, "triton_cache_hash": None}
    engine = tar_bytes(
        {
            "program.pt2": b"program",
            "autotuned/inductor/zw/k2.best_config": json.dumps({"XBLOCK": 8, "found_by_coordesc": False}).encode(),
            "autotuned/inductor/xy/k1.best_config": json.dumps({**config, **bookkeeping}).encode(),
            "autotuned/inductor/ab/k3.best_config": b"not json",
            "autotuned/inductor/cd/k4.best_config": b"[1, 2]",
            "autotuned/k5.best_config": json.dumps(config).encode(),
        },
        links={"autotuned/inductor/ef/k6.best_config": "/etc/passwd"},
    )
    configs = tuned_configs(engine)
    assert configs == {"xy/k1.best_config": config, "zw/k2.best_config": {"XBLOCK": 8, "found_by_coordesc": False}}
    assert list(configs) == sorted(configs)
    assert tuned_configs(tar_bytes({"program.pt2": b"program"})) == {}  # a build that tuned nothing
