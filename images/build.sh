#!/usr/bin/env bash
# Build the CI images (operator, worker-onnxruntime, worker-inductor-cpu) without a container daemon
# and export them to the local OCI image store the test node agent runs pods from.
#
#   bash images/build.sh [operator] [worker-onnxruntime] [worker-inductor-cpu]   (`make images`)
#
# - Base: `mmdebstrap` makes a Debian trixie rootfs (Python 3.13; bookworm's 3.11.2 predates
#   `tarfile` extraction filters, which the backends use) (python3, python3-venv, ca-certificates) from
#   Debian's packages; it is imported into buildah as enginewright/base:<key> (no registry is
#   reachable for `FROM python:...`).
# - Python packages: PyPI is not reachable from inside a build, so wheels are downloaded on the host
#   (`pip download` for the base's Python 3.13 and manylinux x86_64, cached in $CACHE/wheelhouse)
#   into the build context; the Containerfiles install
#   them with `pip --no-index`.
# - `buildah --storage-driver=vfs bud --isolation=chroot` builds each Containerfile as root; the image
#   is pushed to the OCI layout $CACHE/images/oci under its name (enginewright/operator:<version>).
# - worker-inductor-cpu: PyPI's torch (a CUDA build whose libraries link the CUDA runtime libraries,
#   installed with --no-deps from images/worker-inductor-cpu/torch.txt: no triton, it runs on CPU)
#   on a base that also has g++ and python3-dev (Inductor's CPU code generation compiles C++). The
#   torch layer is its own image, enginewright/torch-cpu:<key> (images/torch.Containerfile), keyed by
#   that list and the base only, so a change of the package's sources rebuilds only the layer above it.
#   worker-inductor-cuda (on demand: `bash images/build.sh worker-inductor-cuda`, not in CI): the same
#   with torch's own dependencies (CUDA libraries, triton), images/worker-inductor-cuda/torch.txt.
# - Cache: each image is keyed by the sha256 of its Containerfile, this script, the base recipe,
#   pyproject.toml and the package sources; a warm run only checks the keys.
# Installs buildah and mmdebstrap with apt-get when they are missing (needs root, as the build does).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${ENGINEWRIGHT_CACHE:-$HOME/.cache/enginewright}"
STORE="$CACHE/images"
OCI="$STORE/oci"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/pyproject.toml" | head -1)"
SUITE=trixie
PYTHON_VERSION=3.13  # trixie's python3: the wheels are downloaded for it
BASE_PACKAGES="python3,python3-venv,ca-certificates"
CC_PACKAGES="$BASE_PACKAGES,g++,python3-dev"  # worker-inductor-cpu: Inductor compiles C++ kernels on CPU
IMAGES=("$@")
[ ${#IMAGES[@]} -gt 0 ] || IMAGES=(operator worker-onnxruntime worker-inductor-cpu)
PYTHON="${PYTHON:-python3}"  # needs setuptools >= 70.1 (the venv of `make venv`)
BUILDAH=(buildah --storage-driver=vfs --root "$STORE/storage" --runroot "$STORE/run")
log() { echo "[images] $*" >&2; }

sha() { sha256sum | cut -c1-16; }
key_of_base() { printf '%s %s %s' "$SUITE" "$1" "minbase-v2" | sha; }
base_key="$(key_of_base "$BASE_PACKAGES")"
cc_base_key="$(key_of_base "$CC_PACKAGES")"
# The Inductor workers' torch layer: images/<image>/torch.txt, installed --no-deps for the CPU variant
# (its list names every package) and with its dependencies for the CUDA one (torch's own pins).
torch_list() { echo "$REPO/images/$1/torch.txt"; }
torch_deps() { case "$1" in worker-inductor-cpu) echo --no-deps ;; *) echo "" ;; esac; }
torch_key_of() { (cat "$(torch_list "$1")" "$REPO/images/torch.Containerfile"; echo "$cc_base_key $(torch_deps "$1")") | sha; }
is_torch_image() { case "$1" in worker-inductor-cpu|worker-inductor-cuda) return 0 ;; *) return 1 ;; esac; }
source_key="$( (cd "$REPO" && cat pyproject.toml images/build.sh \
  && find operator -type f \( -name '*.py' -o -name '*.json' -o -name '*.yaml' \) -not -path '*/__pycache__/*' \
     -not -path '*.egg-info*' | LC_ALL=C sort | xargs cat) | sha)"

key_of() { (cat "$REPO/images/$1/Containerfile"; echo "$base_key $source_key"; ! is_torch_image "$1" || torch_key_of "$1") | sha; }
extra_of() { case "$1" in operator) echo operator ;; worker-onnxruntime) echo onnxruntime ;;
             worker-inductor-cpu|worker-inductor-cuda) echo worker ;; *) echo "no CI build for $1" >&2; exit 2 ;; esac; }
torch_ref_of() { echo "enginewright/torch-${1#worker-inductor-}:$(torch_key_of "$1")"; }
base_of() { if is_torch_image "$1"; then torch_ref_of "$1"; else echo "enginewright/base:$base_key"; fi; }

# One build at a time per cache: builds share buildah's storage and the OCI layout.
mkdir -p "$STORE"
exec 9>"$STORE/.build.lock"
flock 9

missing=()
for image in "${IMAGES[@]}"; do
  [ -f "$STORE/built/$image-$(key_of "$image")" ] || missing+=("$image")
done
if [ ${#missing[@]} -eq 0 ]; then
  log "up to date: ${IMAGES[*]} ($OCI)"
  echo "$OCI"
  exit 0
fi

if ! command -v buildah >/dev/null || ! command -v mmdebstrap >/dev/null; then
  log "installing buildah and mmdebstrap (apt-get)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    buildah mmdebstrap >/dev/null
fi
mkdir -p "$STORE/built" "$STORE/base" "$CACHE/wheelhouse"

# ---------------------------------------------------------------- bases
# make_base KEY PACKAGES: a Debian rootfs from mmdebstrap as the image enginewright/base:KEY.
make_base() {
  local key="$1" packages="$2" ref="enginewright/base:$1" began tarball ctr
  "${BUILDAH[@]}" inspect --type image "$ref" >/dev/null 2>&1 && return 0
  began=$(date +%s)
  tarball="$STORE/base/base-$key.tar"
  if [ ! -f "$tarball" ]; then
    log "mmdebstrap $SUITE ($packages)"
    mmdebstrap --quiet --variant=minbase --include="$packages" --aptopt='Acquire::Retries "3"' \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
      "$SUITE" "$tarball.tmp"
    mv "$tarball.tmp" "$tarball"
  fi
  ctr=$("${BUILDAH[@]}" from scratch)
  "${BUILDAH[@]}" add "$ctr" "$tarball" / >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/sh "$ctr"
  "${BUILDAH[@]}" commit --quiet --rm "$ctr" "$ref" >/dev/null
  log "base $ref ($packages) in $(( $(date +%s) - began )) s"
}
make_base "$base_key" "$BASE_PACKAGES"
base_ref="enginewright/base:$base_key"
if printf '%s\n' "${missing[@]}" | grep -q '^worker-inductor-'; then make_base "$cc_base_key" "$CC_PACKAGES"; fi
# Older bases (another recipe) go: vfs keeps every layer as a full copy.
for old in $("${BUILDAH[@]}" images --format '{{.Name}}:{{.Tag}}' | grep '/base:' | grep -v -e ":$base_key\$" -e ":$cc_base_key\$" || true); do
  "${BUILDAH[@]}" rmi "$old" >/dev/null 2>&1 || true
done
rm -f $(ls "$STORE"/base/base-*.tar | grep -v -e "base-$base_key.tar" -e "base-$cc_base_key.tar") 2>/dev/null || true

# Wheel download flags for the base's Python on manylinux x86_64.
target=(--only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp
        --abi "cp${PYTHON_VERSION/./}" --abi abi3 --abi none)
# every manylinux tag trixie's glibc (2.41) runs, newest first: wheels name the oldest glibc they need
for minor in $(seq 28 -1 5); do target+=(--platform "manylinux_2_${minor}_x86_64"); done
for platform in manylinux2014 manylinux2010 manylinux1 linux; do target+=(--platform "${platform}_x86_64"); done

# ---------------------------------------------------------------- torch layers (from PyPI)
make_torch() {
  local image="$1" ref list deps began context old
  ref="$(torch_ref_of "$image")" list="$(torch_list "$image")" deps="$(torch_deps "$image")"
  "${BUILDAH[@]}" inspect --type image "$ref" >/dev/null 2>&1 && return 0
  began=$(date +%s)
  context="$STORE/context/torch-$image"
  rm -rf "$context" && mkdir -p "$context/wheels"
  cp "$REPO/images/torch.Containerfile" "$context/Containerfile"
  cp "$list" "$context/torch.txt"
  mapfile -t torch_requirements < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$list")
  # shellcheck disable=SC2086  # $deps is empty or one flag
  "$PYTHON" -m pip download -q $deps "${target[@]}" -d "$CACHE/wheelhouse/$PYTHON_VERSION" "${torch_requirements[@]}" >/dev/null
  "$PYTHON" -m pip download -q $deps "${target[@]}" --no-index --find-links "$CACHE/wheelhouse/$PYTHON_VERSION" \
    -d "$context/wheels" "${torch_requirements[@]}" >/dev/null
  "${BUILDAH[@]}" bud --quiet --isolation=chroot --layers=false -f "$context/Containerfile" \
    --build-arg BASE="enginewright/base:$cc_base_key" --build-arg DEPS="$deps" -t "$ref" "$context" >/dev/null
  rm -rf "$context"
  for old in $("${BUILDAH[@]}" images --format '{{.Name}}:{{.Tag}}' | grep "${ref%%:*}:" | grep -v ":${ref##*:}\$" || true); do
    "${BUILDAH[@]}" rmi "$old" >/dev/null 2>&1 || true
  done
  log "$ref in $(( $(date +%s) - began )) s"
}
for image in "${missing[@]}"; do
  if is_torch_image "$image"; then make_torch "$image"; fi
done

# ---------------------------------------------------------------- images
for image in "${missing[@]}"; do
  began=$(date +%s)
  key="$(key_of "$image")"
  context="$STORE/context/$image"
  rm -rf "$context" && mkdir -p "$context/wheels"
  cp "$REPO/images/$image/Containerfile" "$context/"
  extra="$(extra_of "$image")"
  # The package itself, then its dependencies for this extra, as binary wheels for this Python.
  # (built from a copy: an in-tree build would leave build/ and egg-info behind in the checkout)
  rm -rf "$STORE/src" && mkdir -p "$STORE/src"
  (cd "$REPO" && cp -r pyproject.toml README.md operator "$STORE/src/")
  find "$STORE/src" \( -name '__pycache__' -o -name '*.egg-info' \) -prune -exec rm -rf {} +
  "$PYTHON" -m pip wheel -q --no-deps --no-build-isolation -w "$context/wheels" "$STORE/src" >/dev/null
  mapfile -t requirements < <("$PYTHON" - "$REPO/pyproject.toml" "$extra" <<'PY'
import sys, tomllib, re
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
extras = project["optional-dependencies"]
def expand(name, seen=set()):
    for req in extras[name]:
        inner = re.fullmatch(r"enginewright\[(\w+)\]", req)
        if inner:
            yield from expand(inner.group(1))
        else:
            yield req
print("\n".join([*project["dependencies"], *expand(sys.argv[2])]))
PY
)
  "$PYTHON" -m pip download -q "${target[@]}" -d "$CACHE/wheelhouse/$PYTHON_VERSION" "${requirements[@]}" >/dev/null
  "$PYTHON" -m pip download -q "${target[@]}" --no-index --find-links "$CACHE/wheelhouse/$PYTHON_VERSION" \
    -d "$context/wheels" "${requirements[@]}" >/dev/null
  ref="enginewright/$image:$VERSION"
  "${BUILDAH[@]}" bud --quiet --isolation=chroot --layers=false -f "$context/Containerfile" \
    --build-arg BASE="$(base_of "$image")" --build-arg VERSION="$VERSION" --build-arg REVISION="$key" \
    -t "$ref" "$context" >/dev/null
  # Pushing a name again replaces it in the layout's index (the node agent reads the last entry).
  "${BUILDAH[@]}" push --quiet "$ref" "oci:$OCI:$ref" >/dev/null
  "${BUILDAH[@]}" rmi "$ref" >/dev/null 2>&1 || true
  rm -rf "$context"
  rm -f "$STORE/built/$image-"*
  touch "$STORE/built/$image-$key"
  log "$ref built in $(( $(date +%s) - began )) s (key $key)"
done
"${BUILDAH[@]}" rm --all >/dev/null 2>&1 || true
# A push of a name again leaves the manifest it replaced in the layout, unnamed, with its blobs (2.6 GB
# for an Inductor worker whose torch layer changed): they go, and so do blobs no named manifest uses.
"$PYTHON" - "$OCI" <<'PY'
import json, os, sys
from pathlib import Path
root = Path(sys.argv[1])
index = json.loads((root / "index.json").read_text())
named = [m for m in index["manifests"] if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name")]
keep = set()
for entry in named:
    digest = entry["digest"].split(":", 1)[1]
    manifest = json.loads((root / "blobs" / "sha256" / digest).read_text())
    keep |= {digest, manifest["config"]["digest"].split(":", 1)[1],
             *(layer["digest"].split(":", 1)[1] for layer in manifest["layers"])}
(root / "index.json.tmp").write_text(json.dumps({**index, "manifests": named}))
os.replace(root / "index.json.tmp", root / "index.json")
for blob in (root / "blobs" / "sha256").iterdir():
    if blob.name not in keep:
        blob.unlink()
PY
# Unpacked root filesystems of replaced images (the node agent unpacks the new ones on first use).
rm -rf "$STORE/rootfs"
echo "$OCI"
