#!/usr/bin/env bash
# On the GPU machine: unpack out/h200e2e (bench/gpu_e2e_bundle.sh made it) into /tmp/e2e, and print
# the environment bench/gpu_operator_e2e.py runs with:  eval "$(bash bench/gpu_e2e_unpack.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."
root=/tmp/e2e
mkdir -p "$root/bin" "$root/pkgs"
xz -dc out/h200e2e/kube-all.xz > "$root/bin/kube-all" && chmod +x "$root/bin/kube-all"
for tool in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do ln -sf kube-all "$root/bin/$tool"; done
xz -dc out/h200e2e/versitygw.xz > "$root/bin/versitygw" && chmod +x "$root/bin/versitygw"
xz -dc out/h200e2e/pkgs.tar.xz | tar xf - -C "$root/pkgs"
echo "export ENGINEWRIGHT_BIN=$root/bin ENGINEWRIGHT_PKI=$PWD/out/h200e2e/pki PYTHONPATH=$PWD:$PWD/operator:$PWD/bench:$root/pkgs PYTHONUNBUFFERED=1"
