#!/usr/bin/env bash
# Packs what bench/gpu_operator_e2e.py needs on the GPU machine into out/h200e2e (ignored by git),
# within the device call's 64 MiB: that machine has Python 3.12 with torch and numpy, and no network.
#   - kube-all.xz: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl as ONE
#     binary (tests/cluster/kube/allinone, chosen by the name it is started under): 167 MB, 33 MB
#     compressed, where the five separate binaries are 374 MB;
#   - versitygw.xz: the S3 server the tests use;
#   - pkgs.tar.xz: the operator's Python packages (kopf, kubernetes, minio, prometheus-client,
#     pydantic, pyyaml, nvidia-ml-py and their dependencies) for CPython 3.12, unpacked from PyPI's wheels;
#   - pki/: the control plane's certificates (tests.cluster.pki; the GPU machine lacks cryptography).
# Then: run(carry=["out/h200e2e"], command="bash bench/gpu_e2e_unpack.sh && ...") (docs/gpu-end-to-end.md).
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/h200e2e
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out" && mkdir -p "$out"
bins=$(bash tests/cluster/build.sh | tail -1)   # builds the control plane's modules (Go build cache)
(cd tests/cluster/kube && GOFLAGS=-trimpath GOTOOLCHAIN=local go build -ldflags="-s -w" -o "$tmp/kube-all" ./allinone)
xz -T2 -c --x86 --lzma2=preset=9e,dict=256MiB "$tmp/kube-all" > "$out/kube-all.xz" &
xz -T2 -c --x86 --lzma2=preset=9e,dict=64MiB "$(readlink -f "$bins/versitygw")" > "$out/versitygw.xz" &
PY=${PYTHON:-python3}
"$PY" -m pip download -q "kopf>=1.37" "kubernetes>=30.1" "minio>=7.2.7" "prometheus-client>=0.20" pydantic pyyaml \
  nvidia-ml-py --python-version 3.12 --only-binary=:all: --platform manylinux2014_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 -d "$tmp/wheels"
mkdir -p "$tmp/pkgs"
for wheel in "$tmp"/wheels/*.whl; do "$PY" -m zipfile -e "$wheel" "$tmp/pkgs/"; done
tar cf - -C "$tmp/pkgs" . | xz -9e -T2 > "$out/pkgs.tar.xz"
V=$(ls -d "${ENGINEWRIGHT_CACHE:-$HOME/.cache/enginewright}"/venv-*/bin | head -1)
"$V/python" -m tests.cluster.pki "$out/pki" > /dev/null
wait
du -sh "$out"/* && du -sh "$out"
