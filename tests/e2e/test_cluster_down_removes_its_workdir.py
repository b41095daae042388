"""`python -m tests.cluster down` removes the cluster's work directory (private keys, etcd data, S3
objects, logs) unless `up --keep` was given, and then both say where it is kept."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.harness import REPO, bin_dir, wait_for


@pytest.fixture(scope="module")
def binaries() -> Path:
    return bin_dir()


def cluster_cli(*args: str, binaries: Path, **kwargs):
    env = {**os.environ, "ENGINEWRIGHT_BIN": str(binaries)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.cluster", *args],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


def start(tmp_path: Path, binaries: Path, *extra: str):
    state = tmp_path / "cluster.json"
    up = cluster_cli("up", "--state", str(state), *extra, binaries=binaries)
    wait_for(lambda: up.poll() is not None or state.exists(), 120, "`up` to write its state")
    assert up.poll() is None, up.communicate()[1]
    recorded = wait_for(lambda: json.loads(state.read_text()), 10, "a complete state file")
    workdir = Path(recorded["workdir"])
    assert (workdir / "pki").is_dir() and any((workdir / "pki").glob("*.key")), "the cluster's private keys"
    return up, state, workdir


def stop(state: Path, binaries: Path) -> str:
    down = cluster_cli("down", "--state", str(state), binaries=binaries)
    out, err = down.communicate(timeout=60)
    assert down.returncode == 0, err
    return out


def test_down_removes_the_work_directory(tmp_path, binaries):
    up, state, workdir = start(tmp_path, binaries)
    stop(state, binaries)
    out, _ = up.communicate(timeout=60)
    assert up.returncode == 0
    assert not workdir.exists()
    assert "(removed by `down`)" in out


def test_up_keep_keeps_it_and_says_where(tmp_path, binaries):
    up, state, workdir = start(tmp_path, binaries, "--keep")
    try:
        said = stop(state, binaries)
        out, _ = up.communicate(timeout=60)
        assert workdir.is_dir() and any((workdir / "pki").glob("*.key"))
        assert f"work directory kept (it holds private keys): {workdir}" in out
        assert f"work directory kept (up --keep; it holds private keys): {workdir}" in said
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_down_cleans_up_after_an_up_that_was_killed(tmp_path, binaries):
    up, state, workdir = start(tmp_path, binaries)
    up.kill()  # no chance to clean up; the harness's parent-death signal stops the cluster processes
    up.communicate(timeout=60)
    stop(state, binaries)
    assert not workdir.exists() and not state.exists()
