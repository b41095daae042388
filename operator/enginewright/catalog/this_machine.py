"""What this machine is, for `enginewright fetch --gpu auto --compiler-version auto`: its GPU as
GPU feature discovery would label it (from NVML, the `nvidia-ml-py` package, else `nvidia-smi`),
and the compiler runtimes installed in this image, with their versions written as the backends
write them."""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import subprocess
from dataclasses import dataclass

from enginewright.catalog.compatibility import Installed
from enginewright.catalog.gpu_names import product_label


class NoGpuFound(RuntimeError):
    """Neither NVML nor nvidia-smi could name a GPU."""


@dataclass(frozen=True)
class LocalGpu:
    name: str  # NVML's name, e.g. "NVIDIA H200"
    product: str  # nvidia.com/gpu.product, e.g. NVIDIA-H200
    compute_capability: str | None
    driver: str | None
    source: str  # "nvml" or "nvidia-smi"


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_from_nvml(shared: bool = False) -> LocalGpu:
    """The first visible GPU through NVML (`import pynvml`, from the `nvidia-ml-py` package). A GPU in
    MIG mode is named by its first MIG device's profile, as GPU feature discovery's `single` strategy
    labels it."""
    try:
        import pynvml
    except ImportError:
        raise NoGpuFound(
            "NVML is not available: the `nvidia-ml-py` package is not installed (pip install 'enginewright[consumer]')"
        ) from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NoGpuFound(f"NVML could not start ({exc}): no NVIDIA driver visible in this container") from None
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            raise NoGpuFound("NVML sees no GPU in this container (does the pod request nvidia.com/gpu?)")
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = _text(pynvml.nvmlDeviceGetName(handle))
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        profile = None
        try:
            current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
            if current == pynvml.NVML_DEVICE_MIG_ENABLE:
                mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, 0)
                mig_name = _text(pynvml.nvmlDeviceGetName(mig))  # e.g. "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
                profile = mig_name.rsplit(" MIG ", 1)[1] if " MIG " in mig_name else None
        except pynvml.NVMLError:
            profile = None  # not MIG-capable
        return LocalGpu(name, product_label(name, profile, shared), f"{major}.{minor}", driver, "nvml")
    finally:
        pynvml.nvmlShutdown()


def gpu_from_nvidia_smi(shared: bool = False) -> LocalGpu:
    """The first GPU `nvidia-smi --query-gpu=name,compute_cap,driver_version` lists (no MIG profile)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        raise NoGpuFound("nvidia-smi is not on PATH")
    result = subprocess.run(
        [smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    lines = [ln for ln in result.stdout.splitlines() if ln.strip()]
    if result.returncode != 0 or not lines:
        raise NoGpuFound(f"nvidia-smi failed ({result.returncode}): {result.stderr.strip() or result.stdout.strip()}")
    name, cc, driver = [part.strip() for part in lines[0].rsplit(",", 2)]
    return LocalGpu(name, product_label(name, None, shared), cc or None, driver or None, "nvidia-smi")


def local_gpu(shared: bool = False) -> LocalGpu:
    """This machine's GPU: NVML first, then nvidia-smi; NoGpuFound says why both failed."""
    errors = []
    for probe in (gpu_from_nvml, gpu_from_nvidia_smi):
        try:
            return probe(shared)
        except NoGpuFound as exc:
            errors.append(str(exc))
    raise NoGpuFound(
        "--gpu auto found no GPU: " + "; ".join(errors) + ". Pass --gpu PRODUCT "
        "(the node's nvidia.com/gpu.product label) instead."
    )


def installed_compiler(name: str) -> Installed | None:
    """The installed runtime of compiler `name` (onnxruntime, tensorrt, inductor), None if absent.
    Versions are written as the backends' `versions()` write them, so they compare with the catalog."""
    if name == "onnxruntime":
        if importlib.util.find_spec("onnxruntime") is None:
            return None
        return Installed(f"onnxruntime-{importlib.import_module('onnxruntime').__version__}")
    if name == "tensorrt":
        if importlib.util.find_spec("tensorrt") is None:
            return None
        return Installed(f"tensorrt-{importlib.import_module('tensorrt').__version__}")
    if name == "inductor":
        if importlib.util.find_spec("torch") is None:
            return None
        torch = importlib.import_module("torch")
        version = f"inductor-torch-{torch.__version__}"
        if importlib.util.find_spec("triton") is not None:
            version += f"-triton-{importlib.import_module('triton').__version__}"
        return Installed(version, torch.version.cuda)
    return None
