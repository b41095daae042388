"""A module that asks torch whether CUDA is there when imported, as torch 2.11's Inductor does
(`torch/_inductor/runtime/benchmarking.py`): by default torch asks the CUDA runtime, which starts
CUDA's driver in the importing process (`tests/worker/test_builds_fork_only_where_it_is_safe.py`)."""

import torch

asked_nvml = torch.cuda._nvml_based_avail()  # how is_available() below asks: NVML, or the CUDA runtime
available = torch.cuda.is_available()
