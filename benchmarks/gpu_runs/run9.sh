#!/bin/bash
# Call 9 (H200): each source's keys kept on the device (DatastoreBuilder._rows_on_device)
# against the code before it (.gpu/common/base: `git archive` of that commit's package), in the
# same call: long contexts with an encoder of Llama-3.1-8B's shape (random weights, bfloat16,
# layer 9), the warm call with a new list of known sources; then SmolLM2-135M's shape.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENSHAPLEY_CACHE=/tmp/tscache
for s in quotesum verigran nq; do mkdir -p /tmp/data/$s; gunzip -c .gpu/common/data/$s.jsonl.gz > /tmp/data/$s/dev.jsonl; done
L="python3 benchmarks/gpu_bench.py long --model .gpu/common/tok --device cuda --data /tmp/data"
E="--shape llama-3.1-8b --dtype bfloat16 --layer 9 --sizes 4096 16384 65536 --repeats 5"
{ nvidia-smi --query-gpu=name,memory.total --format=csv; cat /proc/loadavg; } > $OUT/run.log 2>&1
PYTHONPATH=$PWD/.gpu/common/base timeout 100 $L $E --agreement 0 --out $OUT/long_8b_before.json > $OUT/before.log 2>&1; echo "before rc=$?" >> $OUT/run.log
PYTHONPATH=$PWD timeout 120 $L $E --agreement 10 --agreement-size 16384 --out $OUT/long_8b_after.json > $OUT/after.log 2>&1; echo "after rc=$?" >> $OUT/run.log
PYTHONPATH=$PWD timeout 50 $L --shape smollm2-135m --dtype float32 --layer 8 --sizes 16384 65536 --repeats 5 --agreement 0 \
    --out $OUT/long_135m_after.json > $OUT/after135.log 2>&1; echo "135m rc=$?" >> $OUT/run.log
cat /proc/loadavg >> $OUT/run.log
for f in before after after135; do echo "== $f" >> $OUT/run.log; grep -h "tokens:\|agreement\|Error\|error" $OUT/$f.log >> $OUT/run.log; done
cat $OUT/run.log
