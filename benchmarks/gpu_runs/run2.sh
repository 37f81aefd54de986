#!/bin/bash
# Call 2 (right after call 1, same warm machine): blocks 9-29 arrive; full model; ContextCite beta=64.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD/.gpu/common/src TOKENSHAPLEY_CACHE=/tmp/tscache
G=.gpu/common
if [ ! -f /tmp/parts/m1/tensors.bin ]; then echo "FRESH MACHINE: /tmp/parts/m1 is gone"; ls /tmp; exit 3; fi
{ time python3 $G/gpu_bench.py unpack /tmp/parts/m1 .gpu/m2 --out /tmp/model30; } > $OUT/setup2.log 2>&1 || { cat $OUT/setup2.log; exit 4; }
time python3 $G/gpu_bench.py compare --a /tmp/model30 --b /tmp/model9 --device-a cuda --device-b cuda --data $G/data --answers 40 --out $OUT/compare_full_trunc_cuda.json > $OUT/compare2.log 2>&1
time python3 $G/gpu_bench.py bench --model /tmp/model9 --device cuda --data $G/data --questions 14 --skip-tokenshapley --cc-model /tmp/model30 --cc-beta 64 --cc-answers 40 --out $OUT/gpu_cc64.json > $OUT/gpu_cc64.log 2>&1
time python3 $G/gpu_bench.py bench --model /tmp/model9 --device cpu --data $G/data --questions 14 --skip-tokenshapley --cc-model /tmp/model30 --cc-beta 64 --cc-answers 8 --out $OUT/devcpu_cc64.json > $OUT/devcpu_cc64.log 2>&1
grep -h -E '"(span_accuracy|mean|same_span_predictions|identical_results)"' $OUT/*.json
