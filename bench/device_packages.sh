#!/usr/bin/env bash
# The GPU device machine has Python 3.12 with torch, numpy and onnxruntime but not pydantic or
# pyyaml, and no network: unpack their cp312 wheels into out/devpkgs (ignored by git), then pass
# `carry: ["out/devpkgs"]` to the device call and put it on PYTHONPATH there:
#   export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
rm -rf out/devpkgs out/devwheels
mkdir -p out/devpkgs out/devwheels
"$PY" -m pip download -q pydantic pyyaml --python-version 3.12 --only-binary=:all: \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d out/devwheels
for wheel in out/devwheels/*.whl; do "$PY" -m zipfile -e "$wheel" out/devpkgs/; done
echo "out/devpkgs: $(du -sh out/devpkgs | cut -f1)"
