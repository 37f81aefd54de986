#!/bin/bash
# Call 3: code-path probes on cuda (packing per dtype, streaming, chat generator, longer contexts),
# the same probes on the machine's CPU, and a repeat of the GPU fp32 timing run.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD/.gpu/common/src:$PWD/.gpu/common/site TOKENSHAPLEY_CACHE=/tmp/tscache
G=.gpu/common
python3 $G/gpu_bench.py unpack .gpu/m1 --out /tmp/model9 > $OUT/setup3.log 2>&1 || { cat $OUT/setup3.log; exit 4; }
time python3 $G/gpu_bench.py probe --model /tmp/model9 --device cuda --data $G/data --questions 10 --scale 4096 16384 --out $OUT/probe_cuda.json > $OUT/probe_cuda.log 2>&1
time python3 $G/gpu_bench.py probe --model /tmp/model9 --device cpu --data $G/data --questions 10 --scale 4096 16384 --out $OUT/probe_cpu.json > $OUT/probe_cpu.log 2>&1
time python3 $G/gpu_bench.py bench --model /tmp/model9 --device cuda --data $G/data --out $OUT/gpu_fp32_repeat.json > $OUT/gpu_fp32_repeat.log 2>&1
grep -h -E '"(packing_works|ok|same_citations|cold_seconds|warm_same_seconds|context_tokens|mean)"' $OUT/probe_*.json
