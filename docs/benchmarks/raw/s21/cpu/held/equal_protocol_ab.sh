#!/bin/bash
# the held serving process, side by side with the protocol held equal (5 rounds a route, no confirmation)
source ~/.cache/enginewright/venv-9bd423982816/bin/activate
D=/tmp/ic-s21/data
ARGS="$D/mlp.pt2 --backend inductor --search mixed --metric cosine --threshold 0.001 --device cpu --inputs $D/inputs-0.npz --references $D/references-0.npz --inputs $D/inputs-1.npz --references $D/references-1.npz --knob compile=true,false --knob freezing=true,false --knob coordinate_descent_tuning=true,false --no-confirm --min-rounds 5 --max-rounds 5"
OUT=/tmp/held-ab; rm -rf $OUT; mkdir -p $OUT
for pair in 0 1 2; do
  if [ $((pair % 2)) -eq 0 ]; then order="before after"; else order="after before"; fi
  for v in $order; do
    if [ $v = before ]; then code=/tmp/ew-b22/operator; prof=/tmp/tp_before.py; else code=/tmp/ew-a22/operator; prof=/work/main/bench/tune_profile.py; fi
    s=$(date +%s.%N)
    PYTHONPATH=$code python $prof --json $OUT/pair$pair-$v.json -- $ARGS --out $OUT/pair$pair-$v > $OUT/pair$pair-$v.log 2>&1
    e=$(date +%s.%N)
    echo "pair $pair $v wall $(echo "$e - $s" | bc) $(grep -o 'spent.*' $OUT/pair$pair-$v.log)"
  done
done
