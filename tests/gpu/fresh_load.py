"""Load an Inductor engine in a fresh process, as a consumer or a serving process does, and count the
C++ libraries that load compiled (a host engine that carries its own must compile none)."""

import json
import subprocess
import sys
from pathlib import Path

LOAD = """
import json, os, sys
from pathlib import Path
if sys.argv[5] == "imported-ahead":  # as a serving process launched before its engine was built
    import importlib
    from enginewright.worker.child import PRELOADED
    for module in PRELOADED["inductor"]:
        importlib.import_module(module)
import numpy as np
from torch._inductor import cpp_builder
from enginewright.backends.inductor import InductorBackend

built = []
build = cpp_builder.CppBuilder.build
def counted(self):
    built.append(self.get_target_file_path())
    return build(self)
cpp_builder.CppBuilder.build = counted
from torch._inductor import cpu_vec_isa
probed = []
if hasattr(cpu_vec_isa.VecISA, "_probe_load"):  # torch that keeps a .load_ok marker (2.15)
    probe_load = cpu_vec_isa.VecISA._probe_load
    def counted_probe(self, path):
        probed.append(path)
        return probe_load(self, path)
    cpu_vec_isa.VecISA._probe_load = counted_probe
else:  # older torch (2.11, the H200's) checks every probe with a subprocess, no marker
    import subprocess
    check_call = subprocess.check_call
    def counted_check_call(args, *rest, **options):
        if isinstance(args, list) and any("cdll.LoadLibrary(" in str(arg) for arg in args):
            probed.append(args)
        return check_call(args, *rest, **options)
    subprocess.check_call = counted_check_call
cubins = []  # Triton kernels compiled to machine code here (a kernel found in Triton's cache is not)
misses = []  # Triton's cache indexes that named a file not there (so the kernel was compiled again)
descents = []  # kernels this load tuned by coordinate descent (an engine that brings its configs tunes none)
served, seen = [], set()  # each kernel's config as its first run left it: what the load serves
try:
    from triton.backends.nvidia.compiler import CUDABackend
    make_cubin = CUDABackend.make_cubin
    def counted_cubin(self, src, metadata, *args, **kwargs):
        cubins.append(str(metadata.get("name")) if isinstance(metadata, dict) else "?")
        return make_cubin(self, src, metadata, *args, **kwargs)
    CUDABackend.make_cubin = counted_cubin
    from triton.runtime.cache import FileCacheManager
    get_group = FileCacheManager.get_group
    def logged_group(self, filename):
        group = get_group(self, filename)
        index = Path(self.cache_dir) / f"__grp__{filename}"
        try:
            named = json.loads(index.read_text()).get("child_paths", {})
        except (OSError, ValueError) as exc:
            named = {"(index)": f"{exc}"}
        absent = [str(p) for p in named.values() if not os.path.exists(str(p))]
        if group is None or absent:
            misses.append({"key": Path(self.cache_dir).name, "file": filename, "absent": absent})
        return group
    FileCacheManager.get_group = logged_group
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    descend = CachingAutotuner.coordinate_descent_tuning
    def counted_descent(self, *args, **kwargs):
        descents.append(self.fn.__name__ if self.fn is not None else "?")
        return descend(self, *args, **kwargs)
    CachingAutotuner.coordinate_descent_tuning = counted_descent
    run_kernel = CachingAutotuner.run
    def served_run(self, *args, **kwargs):
        out = run_kernel(self, *args, **kwargs)
        if id(self) not in seen and len(self.launchers) == 1:
            seen.add(id(self))
            config = self.launchers[0].config
            served.append({"kernel": getattr(self.fn, "__name__", "?"), "config": {
                **config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages,
                "found_by_coordesc": bool(getattr(config, "found_by_coordesc", False))},
                "coordinate_descent_tuning": bool(self.inductor_meta.get("coordinate_descent_tuning"))})
        return out
    CachingAutotuner.run = served_run
except (ImportError, AttributeError):  # no Triton, or one whose cache has no index of a kernel's files
    pass
if sys.argv[6] == "torchs-lookup":  # the load as before 9c0757c: torch's own lookup of a kernel's tuned config
    import enginewright.backends.inductor as inductor_backend
    inductor_backend._serve_tuned_configs = lambda: None
engine, workdir, inputs, device = Path(sys.argv[1]), Path(sys.argv[2]), dict(np.load(sys.argv[3])), sys.argv[4]
runner = InductorBackend(device=device).load(engine.read_bytes(), workdir)
out = runner.run(inputs)["output"]
libraries = [path for path in built if path.endswith((".so", ".o"))]  # (a header's preprocessing is not one)
me, children = str(os.getpid()), 0
for stat in Path("/proc").glob("[0-9]*/stat"):
    try:
        children += stat.read_text().rpartition(")")[2].split()[1] == me
    except OSError:
        pass
import torch._inductor.config as config
print(json.dumps({"compiled": len(libraries), "built": built, "describe": runner.describe(), "output": out.tolist(),
                  "children": children, "compile_threads": config.compile_threads, "probe_loads": len(probed),
                  "triton_compiled": len(cubins), "triton_compiled_kernels": cubins, "triton_misses": misses,
                  "descended": descents, "served": served}))
"""


def load_fresh(
    engine: Path,
    workdir: Path,
    inputs: Path,
    device: str = "cpu",
    imported_ahead: bool = False,
    torchs_lookup: bool = False,
) -> dict:
    """What loading `engine` in a fresh process into `workdir` gave on `inputs` (an .npz), after
    importing the modules a serving process imports ahead (`child.await_engine`) when `imported_ahead`: the
    libraries it compiled (`compiled`, `built`), the runner's `describe()`, the output, the processes
    the load left running beside it (`children`), Inductor's `compile_threads` after it, how many
    of the vector-instruction probes' libraries it loaded in a subprocess to check them (`probe_loads`),
    and how many Triton kernels it compiled to machine code (`triton_compiled`; 0 without Triton), by
    name (`triton_compiled_kernels`), with the cache lookups Triton missed and the files their index
    named that were not there (`triton_misses`), the kernels it tuned by coordinate descent
    (`descended`), and each Triton kernel's config as its first run left it, the one served
    (`served`: kernel, config with num_warps, num_stages and found_by_coordesc, and whether the
    kernel was compiled to be tuned by coordinate descent). `torchs_lookup`: the load leaves a kernel's
    tuned config to torch's own lookup (`_serve_tuned_configs` off), as loads were before it."""
    args = [str(engine), str(workdir), str(inputs), device, "imported-ahead" if imported_ahead else "-"]
    args.append("torchs-lookup" if torchs_lookup else "-")
    done = subprocess.run([sys.executable, "-c", LOAD, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def export_mlp(folder: Path, device: str = "cpu", rows: int = 16, hidden: int = 256, outputs: int = 32):
    """A small MLP (64 -> `hidden` -> `outputs`, `rows` rows) exported to `folder`/model.pt2 with one
    input saved to `folder`/inputs.npz: its input's name, the input, and the model's output on that
    input (the reference)."""
    import numpy as np
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, outputs)).eval()
    exported = torch.export.export(model.to(device), (torch.zeros(rows, 64, device=device),))
    (name,) = [
        s.arg.name
        for s in exported.graph_signature.input_specs
        if s.kind == torch.export.graph_signature.InputKind.USER_INPUT
    ]
    torch.export.save(exported, str(folder / "model.pt2"))
    x = np.random.default_rng(0).standard_normal((rows, 64)).astype(np.float32)
    np.savez(folder / "inputs.npz", **{name: x})
    with torch.no_grad():
        reference = model(torch.from_numpy(x).to(device)).cpu().numpy()
    return name, x, reference
