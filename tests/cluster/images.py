"""The node agent's local image store: images that `images/build.sh` pushed to an OCI layout
(`$ENGINEWRIGHT_CACHE/images/oci`, one name per image, e.g. `enginewright/operator:0.1.0`), unpacked
layer by layer (whiteouts applied) into a read-only base rootfs per manifest digest, and the argv
that runs one container from such a rootfs as the kubelet + runtime would, without a daemon:

    unshare --mount (private) -> overlay (image rootfs + the pod's own upper dir) -> bind-mount the
    pod's volumes at their mountPaths, /proc, /dev -> remount the root read-only when the container
    asks for readOnlyRootFilesystem -> chroot as the container's user (its securityContext, else the
    image's USER) -> `env -C <workingDir>` the command.

All of it works as root on the CI machine; the agent runs images only when it was started with an
image store (`--images DIR`), see tests/cluster/node_agent.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REF_ANNOTATION = "org.opencontainers.image.ref.name"


def default_store() -> Path:
    """Where images/build.sh exports its images."""
    cache = Path(os.environ.get("ENGINEWRIGHT_CACHE", Path.home() / ".cache/enginewright"))
    return cache / "images" / "oci"


def version() -> str:
    for line in (REPO / "pyproject.toml").read_text().splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise RuntimeError("no version in pyproject.toml")


def image_name(kind: str) -> str:
    """enginewright/<kind>:<version>, the names images/build.sh gives (and the operator's default)."""
    return f"enginewright/{kind}:{version()}"


class ImageNotFound(LookupError):
    pass


@dataclass(frozen=True)
class Image:
    ref: str
    digest: str  # the manifest's
    config: dict  # the OCI image config's "config" (User, Env, Entrypoint, Cmd, WorkingDir, Labels)
    rootfs: Path
    size_bytes: int  # compressed layers

    @property
    def user(self) -> str:
        return self.config.get("User") or "0"

    @property
    def env(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in self.config.get("Env") or [])

    @property
    def labels(self) -> dict[str, str]:
        return self.config.get("Labels") or {}


class ImageStore:
    """An OCI image layout (read) and a directory of unpacked root filesystems beside it."""

    def __init__(self, layout: Path, rootfs_dir: Path | None = None):
        self.layout = Path(layout)
        self.rootfs_dir = Path(rootfs_dir) if rootfs_dir else self.layout.parent / "rootfs"

    def _blob(self, digest: str) -> Path:
        algorithm, hexdigest = digest.split(":", 1)
        return self.layout / "blobs" / algorithm / hexdigest

    def _json(self, digest: str) -> dict:
        return json.loads(self._blob(digest).read_text())

    def refs(self) -> dict[str, str]:
        """Image name -> manifest digest (the last entry of a name wins, as a re-push replaces it)."""
        index = self.layout / "index.json"
        if not index.exists():
            return {}
        out = {}
        for manifest in json.loads(index.read_text()).get("manifests", []):
            name = (manifest.get("annotations") or {}).get(REF_ANNOTATION)
            if name:
                out[name] = manifest["digest"]
        return out

    def has(self, ref: str) -> bool:
        return ref in self.refs()

    def describe(self, ref: str) -> tuple[str, dict, dict]:
        digest = self.refs().get(ref)
        if digest is None:
            raise ImageNotFound(
                f"image {ref!r} is not in the local image store {self.layout} "
                f"(it has: {', '.join(sorted(self.refs())) or 'nothing'}); build it with `make images`"
            )
        manifest = self._json(digest)
        return digest, manifest, self._json(manifest["config"]["digest"])

    def image(self, ref: str) -> Image:
        """The image `ref`, unpacked (once per manifest digest) into its rootfs."""
        digest, manifest, config = self.describe(ref)
        rootfs = self.rootfs_dir / digest.split(":", 1)[1][:16]
        done = rootfs.with_name(rootfs.name + ".complete")
        if not done.exists():
            self.rootfs_dir.mkdir(parents=True, exist_ok=True)
            with open(self.rootfs_dir / ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # two pods of one new image unpack it once
                if not done.exists():
                    shutil.rmtree(rootfs, ignore_errors=True)
                    rootfs.mkdir()
                    for layer in manifest["layers"]:
                        unpack_layer(self._blob(layer["digest"]), rootfs)
                    done.touch()
        size = sum(layer["size"] for layer in manifest["layers"])
        return Image(ref, digest, config.get("config") or {}, rootfs, size)


def unpack_layer(blob: Path, rootfs: Path) -> None:
    """Apply one layer tar (any compression) to `rootfs`: `.wh.<name>` deletes <name>,
    `.wh..wh..opq` empties its directory, everything else is extracted with owners and modes."""
    with tarfile.open(blob, "r:*") as tar:
        members = []
        for member in tar:
            path = Path(member.name.lstrip("/"))
            if path.name == ".wh..wh..opq":
                target = rootfs / path.parent
                if target.is_dir():
                    for child in target.iterdir():
                        _remove(child)
            elif path.name.startswith(".wh."):
                _remove(rootfs / path.parent / path.name[len(".wh.") :])
            else:
                members.append(member)
        tar.extractall(rootfs, members=members, numeric_owner=True, filter="fully_trusted")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def parse_user(text: str) -> tuple[int, int]:
    """An image's USER as uid:gid (numeric only: the images here say `65532:65532`)."""
    uid, _, gid = text.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        raise ValueError(f"image USER {text!r} is not numeric uid[:gid]; this node agent resolves no user names")
    return int(uid), int(gid or uid)


def path_in_root(root: Path, path: str) -> str:
    """`path` inside the image with its symlinks resolved inside the image (as chroot would), as a
    relative path: Debian's /var/run -> /run must not lead a mount out of the rootfs onto the host."""
    pending = [p for p in path.split("/") if p]
    resolved: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            resolved = resolved[:-1]
            continue
        candidate = root.joinpath(*resolved, part)
        if candidate.is_symlink():
            hops += 1
            if hops > 40:
                raise ValueError(f"too many symlinks resolving {path} in {root}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            pending = [p for p in target.split("/") if p] + pending
            continue
        resolved.append(part)
    return "/".join(resolved)


def container_argv(
    image: Image,
    pod_dir: Path,
    argv: list[str],
    mounts: dict[str, Path],
    uid: int,
    gid: int,
    working_dir: str,
    read_only_root: bool,
) -> list[str]:
    """The host argv that runs `argv` inside `image` (see the module docstring)."""
    merged, upper, work = pod_dir / "rootfs", pod_dir / "upper", pod_dir / "overlay-work"
    for path in (merged, upper, work):
        path.mkdir(parents=True, exist_ok=True)
    q = shlex.quote
    script = [
        "set -e",
        f"mount -t overlay overlay -o lowerdir={q(str(image.rootfs))},upperdir={q(str(upper))},workdir={q(str(work))} "
        f"{q(str(merged))}",
        f"mount -t proc proc {q(str(merged / 'proc'))}",
        f"mount --rbind /dev {q(str(merged / 'dev'))}",
    ]
    for mount_path, source in sorted(mounts.items()):
        target = merged / path_in_root(image.rootfs, mount_path)
        script.append(f"mkdir -p {q(str(target))} && mount --bind {q(str(source))} {q(str(target))}")
    script.append(f"mkdir -p {q(str(merged / path_in_root(image.rootfs, working_dir)))}")
    if read_only_root:
        script.append(f"mount -o remount,bind,ro {q(str(merged))}")
    inner = ["/usr/bin/env", "-C", working_dir, "--", *argv]
    script.append(
        f"exec chroot --userspec={uid}:{gid} --groups={gid} {q(str(merged))} " + " ".join(q(a) for a in inner)
    )
    return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", "\n".join(script)]
