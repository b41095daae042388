#!/usr/bin/env bash
# Builds the real test/demo infrastructure from Go modules and caches it outside the repo:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl  (wrapper module ./kube)
#   versitygw (S3 server, Apache-2.0), helm
# Each tool lands in $ENGINEWRIGHT_CACHE/bin/<tool>-<key>/, where <key> names its version (and, for
# the wrapper module, a hash of its sources), so a second run builds nothing.
# Prints the bin directory holding links to every tool as its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${ENGINEWRIGHT_CACHE:-$HOME/.cache/enginewright}"
KUBE_VERSION="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/kube/go.mod")"
VERSITYGW_VERSION="${VERSITYGW_VERSION:-v1.8.0}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
export GOFLAGS="-trimpath" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
mkdir -p "$cache/bin" "$cache/current"

log() { echo "[build] $*" >&2; }

timed() { # timed NAME CMD...: runs CMD, logs its wall time
  local name="$1" start; shift; start=$(date +%s)
  "$@"; log "$name built in $(( $(date +%s) - start )) s"
}

# The version a release build stamps in (hack/lib/version.sh in k8s.io/kubernetes), so `kubectl version`,
# helm and other clients see v1.34.4 instead of v0.0.0-master+$Format:%H$. buildDate is the release's
# source date from the module proxy (reproducible, so the key below stays the same). gitCommit stays
# empty: the module proxy does not say which upstream commit the tag is.
kube_release_date="$(cd "$here/kube" && go list -m -json k8s.io/kubernetes | sed -n 's/^[[:space:]]*"Time": "\(.*\)",*$/\1/p')"
kube_minor="${KUBE_VERSION#v*.}"; kube_minor="${kube_minor%%.*}"; kube_major="${KUBE_VERSION#v}"; kube_major="${kube_major%%.*}"
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$kube_major -X $pkg.gitMinor=$kube_minor"
  kube_ldflags+=" -X $pkg.gitCommit= -X $pkg.gitTreeState=clean -X $pkg.buildDate=$kube_release_date"
done

kube_key="$KUBE_VERSION-$(cd "$here/kube" && { cat go.mod go.sum cmd/*/main.go; echo "$kube_ldflags"; } | sha256sum | cut -c1-10)"
kube_dir="$cache/bin/kube-$kube_key"
if [ ! -x "$kube_dir/kubectl" ]; then
  log "building Kubernetes $KUBE_VERSION control plane + etcd + kubectl into $kube_dir (cold: ~8 min on 2 cores;"
  log "  a change of version stamps only relinks: the Go build cache keeps the compiled packages)"
  rm -rf "$kube_dir.tmp" && mkdir -p "$kube_dir.tmp"
  (cd "$here/kube" && timed "kube $KUBE_VERSION" go build -ldflags="$kube_ldflags" -o "$kube_dir.tmp/" ./cmd/...)
  mv "$kube_dir.tmp" "$kube_dir"
fi

gw_dir="$cache/bin/versitygw-$VERSITYGW_VERSION"
if [ ! -x "$gw_dir/versitygw" ]; then
  log "building versitygw $VERSITYGW_VERSION"
  timed "versitygw" env GOBIN="$gw_dir" go install -ldflags="-s -w" "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi

helm_dir="$cache/bin/helm-$HELM_VERSION"
if [ ! -x "$helm_dir/helm" ]; then
  log "building helm $HELM_VERSION"
  timed "helm" env GOBIN="$helm_dir" go install -ldflags="-s -w" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

for tool in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  ln -sfn "$kube_dir/$tool" "$cache/current/$tool"
done
ln -sfn "$gw_dir/versitygw" "$cache/current/versitygw"
ln -sfn "$helm_dir/helm" "$cache/current/helm"
echo "$cache/current"
