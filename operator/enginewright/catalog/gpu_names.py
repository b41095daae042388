"""GPU product names exactly as NVIDIA's GPU feature discovery (GFD) writes `nvidia.com/gpu.product`.

GFD (NVIDIA/k8s-device-plugin, internal/lm/resource.go `productLabel`) builds the label from parts:
the NVML device name, then for a MIG device `MIG` and the MIG profile (go-nvlib's profile string
with '+' replaced by '.', e.g. `1g.10gb+me` -> `1g.10gb.me`). In every part each space becomes
'-' (and nothing else changes: no case change, no other character replaced); empty parts are
dropped; the parts are joined with '-'; `-SHARED` is appended when the resource is time-sliced
(replicas > 1) and not renamed. So:

    "NVIDIA H100 80GB HBM3"                     -> NVIDIA-H100-80GB-HBM3
    "NVIDIA A100-SXM4-40GB", MIG 1g.5gb         -> NVIDIA-A100-SXM4-40GB-MIG-1g.5gb
    "NVIDIA L40S", time-sliced                  -> NVIDIA-L40S-SHARED

The catalog is keyed by that label. A shared GPU is the same hardware as the unshared one, so its
engines are the same catalog entries: `catalog_products` says which products a label may take
engines from, explicitly. A MIG slice is not the whole GPU (fewer SMs, less memory): a tuning result
for the whole GPU is not one for the slice, so a MIG label takes only its own entries.
"""

from __future__ import annotations

from dataclasses import dataclass

MIG_MARK = "MIG"
SHARED_SUFFIX = "SHARED"


def _part(text: str) -> str:
    return text.replace(" ", "-")


def mig_profile_name(profile: str) -> str:
    """A MIG profile as GFD writes it: '+' (attribute separator, e.g. `+me`) becomes '.'."""
    return profile.replace("+", ".")


def product_label(nvml_name: str, mig_profile: str | None = None, shared: bool = False) -> str:
    """`nvidia.com/gpu.product` for a device named `nvml_name` by NVML (the parent GPU's name for a
    MIG device), its MIG profile (e.g. `1g.10gb`) when it is a MIG device, and whether GFD marks it
    shared (time-slicing with replicas > 1 and no rename)."""
    parts = [nvml_name] + ([MIG_MARK, mig_profile_name(mig_profile)] if mig_profile else [])
    parts = [_part(p) for p in parts if p]
    if not parts:
        raise ValueError("a GPU product needs a device name (NVML returned an empty name)")
    if shared:
        parts.append(SHARED_SUFFIX)
    return "-".join(parts)


@dataclass(frozen=True)
class GpuProduct:
    """A `nvidia.com/gpu.product` label taken apart."""

    device: str  # the GPU's name as in the label, e.g. NVIDIA-A100-SXM4-40GB
    mig_profile: str | None  # e.g. 1g.5gb, or None for a whole GPU
    shared: bool

    @property
    def label(self) -> str:
        parts = [self.device] + ([MIG_MARK, self.mig_profile] if self.mig_profile else [])
        return "-".join(parts + ([SHARED_SUFFIX] if self.shared else []))

    @property
    def unshared(self) -> str:
        """The label of the same hardware without time-slicing."""
        return GpuProduct(self.device, self.mig_profile, False).label


def parse_product(label: str) -> GpuProduct:
    """Take a product label apart. The MIG marker is the last `-MIG-` followed by a profile that
    starts with a digit (`1g.5gb`, `1c.2g.20gb`), so device names containing `MIG` are not split."""
    if not label:
        raise ValueError("empty GPU product label")
    rest, shared = label, False
    if rest.endswith("-" + SHARED_SUFFIX):
        rest, shared = rest[: -len(SHARED_SUFFIX) - 1], True
    marker = f"-{MIG_MARK}-"
    at = rest.rfind(marker)
    if at > 0 and rest[at + len(marker) :][:1].isdigit():
        return GpuProduct(rest[:at], rest[at + len(marker) :], shared)
    return GpuProduct(rest, None, shared)


def catalog_products(label: str) -> list[str]:
    """The catalog products whose engines fit a GPU with this label, best first: the label itself,
    then, for a shared (time-sliced) GPU, the same GPU unshared."""
    product = parse_product(label)
    return [label] + ([product.unshared] if product.shared else [])
