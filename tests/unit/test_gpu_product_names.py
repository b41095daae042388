"""GPU product names as NVIDIA's GPU feature discovery writes `nvidia.com/gpu.product`
(k8s-device-plugin internal/lm/resource.go: parts with spaces -> '-', joined by '-', MIG profile
with '+' -> '.', '-SHARED' for time-sliced GPUs), on real NVML product strings."""

import pytest

from enginewright.catalog.gpu_names import GpuProduct, catalog_products, parse_product, product_label


@pytest.mark.parametrize(
    "nvml_name,label",
    [
        ("NVIDIA H200", "NVIDIA-H200"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("NVIDIA L40S", "NVIDIA-L40S"),
        ("NVIDIA A10G", "NVIDIA-A10G"),
        ("NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"),
        ("NVIDIA RTX 6000 Ada Generation", "NVIDIA-RTX-6000-Ada-Generation"),
        ("Tesla T4", "Tesla-T4"),
        ("NVIDIA GeForce RTX 4090", "NVIDIA-GeForce-RTX-4090"),
    ],
)
def test_whole_gpus_are_named_as_gpu_feature_discovery_labels_them(nvml_name, label):
    assert product_label(nvml_name) == label
    assert parse_product(label) == GpuProduct(label, None, False)


def test_mig_devices_carry_the_parent_name_mig_and_the_profile():
    assert product_label("NVIDIA A100-SXM4-40GB", "1g.5gb") == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert product_label("NVIDIA H100 80GB HBM3", "1g.10gb+me") == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me"
    assert product_label("NVIDIA A100-SXM4-40GB", "1c.2g.10gb") == "NVIDIA-A100-SXM4-40GB-MIG-1c.2g.10gb"
    assert parse_product("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me") == GpuProduct(
        "NVIDIA-H100-80GB-HBM3", "1g.10gb.me", False
    )


def test_shared_gpus_get_the_suffix_after_the_mig_profile():
    assert product_label("NVIDIA L40S", shared=True) == "NVIDIA-L40S-SHARED"
    assert product_label("NVIDIA A100-SXM4-40GB", "1g.5gb", shared=True) == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED"
    parsed = parse_product("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED")
    assert parsed == GpuProduct("NVIDIA-A100-SXM4-40GB", "1g.5gb", True)
    assert parsed.label == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED"
    assert parsed.unshared == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"


def test_a_shared_gpu_takes_the_unshared_gpus_engines_a_mig_slice_only_its_own():
    assert catalog_products("NVIDIA-H200-SHARED") == ["NVIDIA-H200-SHARED", "NVIDIA-H200"]
    assert catalog_products("NVIDIA-H200") == ["NVIDIA-H200"]
    assert catalog_products("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") == ["NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"]


def test_only_spaces_change_and_an_empty_name_is_refused():
    assert product_label("NVIDIA  H200") == "NVIDIA--H200"  # GFD replaces each space, it does not squeeze
    assert product_label("NVIDIA A100-PCIE-40GB") == "NVIDIA-A100-PCIE-40GB"
    with pytest.raises(ValueError, match="empty name"):
        product_label("")
