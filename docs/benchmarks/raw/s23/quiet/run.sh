#!/usr/bin/env bash
# usage: run.sh NAME OPERATOR_DIR HOGS
name=$1; op=$2; hogs=$3; E=/tmp/qx/ex
pids=""
for i in $(seq 1 $hogs); do python3 -c "while True: pass" & pids="$pids $!"; done
PYTHONPATH=$op:/work/main/bench python /work/main/bench/tune_profile.py --json /tmp/qx/$name.json -- $E/mlp.onnx --backend onnxruntime \
  --inputs $E/inputs-0.npz --inputs $E/inputs-1.npz --references $E/references-0.npz --references $E/references-1.npz \
  --metric cosine --threshold 1e-4 --search mixed --out /tmp/qx/out-$name > /tmp/qx/$name.log 2>&1
[ -n "$pids" ] && kill $pids
python3 -c "
import json; d=json.load(open('/tmp/qx/$name.json')); s=d['spent']
q=s.get('wait_quiet (before timing requests)',{}); g=s.get('wait_quiet: gave up at its limit',{'calls':0})
print('$name', 'wall', d['wall_seconds'], 'exit', d['exit_code'], 'wait_quiet', q.get('seconds'), 'x', q.get('calls'), 'gave up', g['calls'])"
