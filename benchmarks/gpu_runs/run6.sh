#!/bin/bash
# Call 6 (H200): call 4's long-context rows again with the datastore built for the device
# (float16 keys copied, no host float32 keys). Carries .gpu/common and .gpu/m1.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD TOKENSHAPLEY_CACHE=/tmp/tscache
B=benchmarks
for s in quotesum verigran nq; do mkdir -p /tmp/data/$s; gunzip -c .gpu/common/data/$s.jsonl.gz > /tmp/data/$s/dev.jsonl; done
python3 $B/gpu_bench.py unpack .gpu/m1 --out /tmp/model9 > $OUT/setup6.log 2>&1 || { cat $OUT/setup6.log; exit 4; }
timeout 300 python3 $B/gpu_bench.py long --model /tmp/model9 --device cuda --data /tmp/data \
    --sizes 1024 2048 4096 8192 16384 65536 131072 --repeats 5 --agreement 20 --out $OUT/long_cuda6.json > $OUT/long_cuda6.log 2>&1
cat /proc/loadavg
grep -v "^ \|^{\|^}\|Loading weights" $OUT/long_cuda6.log | tail -20
