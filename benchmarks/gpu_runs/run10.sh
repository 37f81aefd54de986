#!/bin/bash
# Call 10 (H100 or H200): the current code on the device. The device-search and device-plumbing
# tests with CUDA present; long contexts (16k, 64k) with the real SmolLM2 encoder after the
# per-source citation views ("Long contexts: the `assemble` step kept per source"), with the
# device search's agreement; QuoteSum dev and the first 20 VeriGran dev questions' span accuracy
# and seconds per answer. Carries .gpu/common and .gpu/m1 (`gpu_bench.py pack`, blocks 0-8).
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD TOKENSHAPLEY_CACHE=/tmp/tscache
B=benchmarks
for s in quotesum verigran nq; do mkdir -p /tmp/data/$s; gunzip -c .gpu/common/data/$s.jsonl.gz > /tmp/data/$s/dev.jsonl; done
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "import torch, transformers, numba; print(torch.__version__, transformers.__version__, numba.__version__)"; cat /proc/loadavg; } > $OUT/run.log 2>&1
python3 $B/gpu_bench.py unpack .gpu/m1 --out /tmp/model10 > $OUT/setup.log 2>&1 || { cat $OUT/setup.log; exit 4; }
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_device.py tests/test_game_candidates.py > $OUT/tests.log 2>&1; echo "tests rc=$?" >> $OUT/run.log
timeout 200 python3 $B/gpu_bench.py long --model /tmp/model10 --device cuda --data /tmp/data \
    --sizes 16384 65536 --repeats 5 --agreement 10 --agreement-size 16384 --out $OUT/long10.json > $OUT/long10.log 2>&1; echo "long rc=$?" >> $OUT/run.log
timeout 120 python3 $B/gpu_bench.py bench --model /tmp/model10 --device cuda --data /tmp/data --dataset quotesum \
    --order-control --out $OUT/bench_quotesum10.json > $OUT/bench_q.log 2>&1; echo "bench quotesum rc=$?" >> $OUT/run.log
timeout 90 python3 $B/gpu_bench.py bench --model /tmp/model10 --device cuda --data /tmp/data --dataset verigran \
    --questions 20 --out $OUT/bench_verigran10.json > $OUT/bench_v.log 2>&1; echo "bench verigran rc=$?" >> $OUT/run.log
cat /proc/loadavg >> $OUT/run.log
{ tail -3 $OUT/tests.log; grep -v "^ \|^{\|^}\|Loading weights" $OUT/long10.log | tail -12; tail -6 $OUT/bench_q.log; tail -6 $OUT/bench_v.log; } >> $OUT/run.log
cat $OUT/run.log
