#!/bin/bash
# Call 8 (H200): long contexts with an encoder of Llama-3.1-8B's shape (random weights,
# bfloat16, layer 9; `gpu_bench.py long --shape`): the device search against the host's, the
# warm call with a new source list against its own encoder pass, cold seconds, peak GPU memory,
# and device-vs-host agreement; then SmolLM2-135M's shape on the same machine at 16k and 64k.
# Carries .gpu/common (the dev files gzipped, the SmolLM2 tokenizer in tok/).
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD TOKENSHAPLEY_CACHE=/tmp/tscache
for s in quotesum verigran nq; do mkdir -p /tmp/data/$s; gunzip -c .gpu/common/data/$s.jsonl.gz > /tmp/data/$s/dev.jsonl; done
L="python3 benchmarks/gpu_bench.py long --model .gpu/common/tok --device cuda --data /tmp/data"
{ nvidia-smi --query-gpu=name,memory.total --format=csv; cat /proc/loadavg; } > $OUT/run.log 2>&1
timeout 210 $L --shape llama-3.1-8b --dtype bfloat16 --layer 9 --sizes 1024 4096 16384 65536 --repeats 5 \
    --agreement 10 --agreement-size 16384 --out $OUT/long_8b.json > $OUT/long_8b.log 2>&1; echo "8b rc=$?" >> $OUT/run.log
timeout 80 $L --shape smollm2-135m --dtype float32 --layer 8 --sizes 16384 65536 --repeats 5 --agreement 0 \
    --out $OUT/long_135m.json > $OUT/long_135m.log 2>&1; echo "135m rc=$?" >> $OUT/run.log
cat /proc/loadavg >> $OUT/run.log
grep -h "tokens:\|agreement\|Error\|error" $OUT/long_8b.log $OUT/long_135m.log >> $OUT/run.log
cat $OUT/run.log
