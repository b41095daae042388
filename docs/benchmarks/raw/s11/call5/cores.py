# The script of s11/call5, as run on the H200 (written there to /tmp/cores.py by the device command):
#   python3 /tmp/cores.py /tmp/gap/engine.inductor.tar "/tmp/gap/data/inputs-*.npz" $OUT/cores.json
# The block's default engine (built by bench/default_gap.py in call 4), 200-call loops (CUDA events)
# with this process's thread pinned to each CPU in turn, three passes, then unpinned.
import os, sys, json, statistics, torch, pathlib
sys.path[:0]=['operator','bench']
from enginewright.backends.inductor import InductorBackend
from enginewright.worker.child import load_npz
import glob
eng=pathlib.Path(sys.argv[1]).read_bytes(); inputs=load_npz(sorted(glob.glob(sys.argv[2]))[0])
r=InductorBackend(device='cuda').load(eng, pathlib.Path('/tmp/coresL')); r.run(inputs)
p=r.prepare(inputs)
def loop(n=200):
    s,e=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); r.run_prepared(p); s.record()
    for _ in range(n): r.run_prepared(p)
    e.record(); e.synchronize(); return s.elapsed_time(e)/n
res={}
with torch.inference_mode():
  for _ in range(50): r.run_prepared(p)
  for rep in range(3):
    for c in sorted(os.sched_getaffinity(0) if rep==0 else res):
        os.sched_setaffinity(0,{c}); loop(50)
        res.setdefault(c,[]).append(loop())
  os.sched_setaffinity(0,set(res))
  free=[loop() for _ in range(9)]
out={'per_core':{c:statistics.median(v) for c,v in res.items()},'unpinned':free,'raw':res}
print(json.dumps(out)); json.dump(out,open(sys.argv[3],'w'),indent=1)
