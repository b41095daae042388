"""A Triton kernel that a CUDA engine's load takes from its caches (Inductor keeps it as the build
pickled it, for a static launcher) serves the config its build tuned: it looks for that config in the
load's cache folder, not the build's (gone on another host), adopts it with its "found by coordinate
descent" mark even where the kernel was compiled for one config (torch 2.9-2.11 adopted none there and
dropped the mark, pytorch#172819, so every load tuned again: 9 kernels compiled in one load on an H100,
session 35), and writes any config it does tune into the load's folder, where `describe()` counts it.

Pure logic, with stand-ins for the kernel and for Inductor's cache lookup (the real ones need CUDA and
Triton); the real load on a GPU is tests/gpu/test_a_tuned_engine_loads_without_tuning_again.py."""

from types import SimpleNamespace

from enginewright.backends.inductor import _kernel_file_here, _tuned_config_here

BUILD = "/work/route-3/caches-build/inductor/ab/cabcdef.py"
LOAD_CACHE = "/srv/engine-7/caches-load/inductor"


def config(block: int, warps: int = 4, **marks):
    return SimpleNamespace(kwargs={"XBLOCK": block}, num_warps=warps, num_stages=1, **marks)


def hashable(cfg):
    return (tuple(sorted(cfg.kwargs.items())), cfg.num_warps, cfg.num_stages)


class Kernel:
    """What `_tuned_config_here` reads and sets of Inductor's `CachingAutotuner`."""

    def __init__(self, *configs):
        self.filename = BUILD
        self.inductor_meta = {"coordinate_descent_tuning": True}
        self.compile_results = [SimpleNamespace(config=c, compiled_from="bundle") for c in configs]
        self.fn = SimpleNamespace(fn=None)  # dropped when pickled, as Inductor does
        self.save_cache_hook = "the build's"
        self.compiled = []

    def _precompile_config(self, cfg):
        self.compiled.append(cfg)
        return SimpleNamespace(config=cfg, compiled_from="here")


class Lookup:
    """Inductor's `check_autotune_cache` over one file: `found` is the tuned config there (or None)."""

    def __init__(self, found):
        self.found, self.asked = found, []
        self.cache = SimpleNamespace(save=f"save into {LOAD_CACHE}")

    def __call__(self, configs, filename, inductor_meta, **options):
        self.asked.append(filename)
        if self.found is None:
            return configs, self.cache, {"autotune_cache_state": "miss"}
        return [self.found], self.cache, {"autotune_cache_state": "hit"}


def reload():
    return SimpleNamespace(fn="the kernel's function, from its source")


def test_the_kernel_looks_for_its_config_in_the_loads_folder_and_saves_there():
    assert _kernel_file_here(BUILD, LOAD_CACHE) == f"{LOAD_CACHE}/ab/cabcdef.py"
    kernel, lookup = Kernel(config(1024)), Lookup(found=None)
    _tuned_config_here(kernel, reload, lookup, hashable, LOAD_CACHE)
    assert lookup.asked == [f"{LOAD_CACHE}/ab/cabcdef.py"]
    assert kernel.save_cache_hook == f"save into {LOAD_CACHE}"  # a config it tunes lands where describe() looks
    assert [r.config.kwargs for r in kernel.compile_results] == [{"XBLOCK": 1024}]  # nothing adopted on a miss
    assert not getattr(kernel.compile_results[0].config, "found_by_coordesc", False)


def test_a_config_found_by_coordinate_descent_is_served_though_the_kernel_was_compiled_for_one():
    kernel = Kernel(config(1024))  # the heuristic's one config; descent found another at the build's first call
    _tuned_config_here(kernel, reload, Lookup(found=config(256, warps=2, found_by_coordesc=True)), hashable, LOAD_CACHE)
    (served,) = kernel.compile_results
    assert served.compiled_from == "here" and served.config.kwargs == {"XBLOCK": 256} and served.config.num_warps == 2
    assert served.config.found_by_coordesc  # so its first call does not descend again
    assert kernel.fn == "the kernel's function, from its source"


def test_a_tuned_config_among_the_compiled_ones_keeps_its_mark():
    kernel = Kernel(config(1024), config(512))
    _tuned_config_here(kernel, reload, Lookup(found=config(512, found_by_coordesc=True)), hashable, LOAD_CACHE)
    (served,) = kernel.compile_results
    assert served.compiled_from == "bundle" and served.config.kwargs == {"XBLOCK": 512}
    assert served.config.found_by_coordesc and kernel.compiled == []
