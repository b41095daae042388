"""client_golang's promlint (the linter behind `promtool check metrics`), built from the Go module
cache that building the Kubernetes binaries fills (client_golang v1.22.0 is one of their modules), with
no network: GOPROXY=off, GOSUMDB=off. Built once into the binaries cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "promlint"
CACHE = Path(os.environ.get("ENGINEWRIGHT_CACHE", Path.home() / ".cache/enginewright")) / "bin"


def promlint_binary() -> Path:
    binary = CACHE / "promlint-client_golang-v1.22.0" / "promlint"
    if binary.exists():
        return binary
    with tempfile.TemporaryDirectory() as work:
        for name in ("main.go", "go.mod"):
            shutil.copy(SOURCE / name, Path(work) / name)
        env = {**os.environ, "GOPROXY": "off", "GOSUMDB": "off", "GOFLAGS": "-mod=mod"}
        built = subprocess.run(
            ["go", "build", "-o", "promlint", "."], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )
        if built.returncode != 0:
            raise RuntimeError(
                f"building promlint failed (needs client_golang v1.22.0 in the Go module cache, "
                f"which building the Kubernetes binaries fills): {built.stderr[-2000:]}"
            )
        binary.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(Path(work) / "promlint"), binary)
    return binary


def lint(exposition: str) -> list[str]:
    """promlint's problems with a Prometheus text exposition, one `metric: text` line each."""
    done = subprocess.run([str(promlint_binary())], input=exposition, capture_output=True, text=True, timeout=60)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"promlint could not parse the exposition: {done.stderr}")
    return done.stdout.splitlines()
