#!/bin/bash
# Call 11 (H100 or H200): the device-search and device-plumbing tests with CUDA present (pytest's
# addopts cleared: the image's pytest lacks the asyncio plugin that --strict-config checks the
# project's options against), then long contexts with an encoder of Llama-3.1-8B's shape (random
# weights, bfloat16, layer 9) on the current code. Carries .gpu/common and .gpu/m1.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD TOKENSHAPLEY_CACHE=/tmp/tscache
B=benchmarks
for s in quotesum verigran nq; do mkdir -p /tmp/data/$s; gunzip -c .gpu/common/data/$s.jsonl.gz > /tmp/data/$s/dev.jsonl; done
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; cat /proc/loadavg; } > $OUT/run.log 2>&1
python3 $B/gpu_bench.py unpack .gpu/m1 --out /tmp/model11 > $OUT/setup.log 2>&1 || { cat $OUT/setup.log; exit 4; }
timeout 240 python3 -m pytest -q -o addopts="" -p no:cacheprovider --import-mode=importlib -rs \
    tests/test_device.py tests/test_game_candidates.py > $OUT/tests.log 2>&1; echo "tests rc=$?" >> $OUT/run.log
timeout 200 python3 $B/gpu_bench.py long --model .gpu/common/tok --device cuda --data /tmp/data --shape llama-3.1-8b \
    --dtype bfloat16 --layer 9 --sizes 16384 65536 --repeats 5 --agreement 0 --out $OUT/long_8b11.json > $OUT/long8b.log 2>&1
echo "long 8b rc=$?" >> $OUT/run.log
cat /proc/loadavg >> $OUT/run.log
{ grep -E "passed|failed|error|SKIP" $OUT/tests.log | tail -8; grep -v "^ \|^{\|^}\|Loading weights" $OUT/long8b.log | tail -6; } >> $OUT/run.log
cat $OUT/run.log
