"""The `enginewright` command as a user meets it: --version, help on every `tune` option, --json for
`plan` and `fetch`, and a missing file named without a Python traceback."""

import hashlib
import json
import subprocess
import sys

import pytest

from enginewright import __version__
from enginewright.api.routes import route_id
from enginewright.cli import build_parser
from enginewright.store.layout import CatalogKeys
from enginewright.store.objects import LocalStore


def ew(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "enginewright", *args], capture_output=True, text=True, **kwargs)


def test_version():
    done = ew("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"enginewright {__version__}", done


def options_without_help(parser, path="enginewright"):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from options_without_help(sub, f"{path} {name}")
        elif not action.help:
            yield f"{path} {'/'.join(action.option_strings) or action.dest}"


def test_every_option_has_help():
    bare = list(options_without_help(build_parser()))
    assert bare == [], bare


@pytest.mark.parametrize(
    "args",
    [
        ("plan", "absent.yaml"),
        ("report", "absent-dir"),
        ("cache", "import", "absent.jsonl", "--out", "x"),
        ("tune", "absent.onnx", "--backend", "onnxruntime", "--inputs", "absent.npz", "--no-accuracy", "--out", "out"),
    ],
)
def test_a_missing_file_is_named_without_a_traceback(args, tmp_path):
    done = ew(*args, cwd=tmp_path, env={"PYTHONPATH": ":".join(sys.path)})
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr and "absent" in done.stderr, done.stderr


def test_plan_json_lists_the_jobs_and_their_routes():
    done = ew("plan", "examples/tuningrun-onnx-fast.yaml", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["mode"] == "fast" and plan["targets"] == ["cpu"] and plan["routesPerTarget"] == 6
    assert [j["batch"] for j in plan["jobs"]] == ["stage1-b000", "stage1-b001"]
    assert plan["jobs"][0]["routes"][0] == {"id": route_id(""), "route": ""}


def test_fetch_json_says_what_was_fetched_or_why_not(tmp_path):
    import onnxruntime

    version = f"onnxruntime-{onnxruntime.__version__}"
    store = LocalStore(tmp_path / "catalog-copy")
    keys = CatalogKeys("mlp", "NVIDIA-H200", version, "ab" * 32, "cd" * 6, "uid-1")
    engine = b"engine bytes"
    sha = hashlib.sha256(engine).hexdigest()
    store.put(keys.engine(".ort.tar"), engine)
    store.put(
        keys.provenance,
        json.dumps(
            {
                "engine": {"uri": store.uri(keys.engine(".ort.tar")), "sha256": sha, "size": len(engine)},
                "model": {"sha256": "ab" * 32},
                "accuracy": {"disabled": False, "lossPerOutput": {"y": 1e-6}},
                "compiler": {"name": "onnxruntime", "versions": {"compiler": version}},
                "gpu": {"product": "NVIDIA-H200"},
                "run": {"uid": "uid-1"},
            }
        ).encode(),
    )
    store.put(
        keys.index,
        json.dumps(
            {
                "model": "mlp",
                "entries": [
                    {
                        "gpuProduct": "NVIDIA-H200",
                        "compilerVersion": version,
                        "folder": keys.folder,
                        "engine": store.uri(keys.engine(".ort.tar")),
                        "sha256": sha,
                        "route": "",
                        "speedup": 1.2,
                        "confirmed": True,
                        "modelSha256": "ab" * 32,
                        "run": "ns/run",
                        "runUid": "uid-1",
                        "publishedAt": "2026-11-01T00:00:00Z",
                    }
                ],
            }
        ).encode(),
    )
    common = (
        "--catalog",
        str(tmp_path / "catalog-copy"),
        "--model",
        "mlp",
        "--compiler-version",
        "auto",
        "--dest",
        str(tmp_path / "dest"),
        "--json",
    )
    done = ew("fetch", *common, "--gpu", "NVIDIA-H200")
    assert done.returncode == 0, done.stderr
    fetched = json.loads(done.stdout)
    assert fetched["fetched"] and fetched["sha256"] == sha and fetched["runUid"] == "uid-1", fetched
    assert open(fetched["engine"], "rb").read() == engine
    refused = ew("fetch", *common, "--gpu", "NVIDIA-A10G")
    answer = json.loads(refused.stdout)
    assert refused.returncode == answer["exitCode"] == 4 and not answer["fetched"] and answer["error"], answer
