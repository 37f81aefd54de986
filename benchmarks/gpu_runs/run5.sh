#!/bin/bash
# Call 5 (right after call 4, same warm machine): blocks 9-29 arrive; the full model;
# ContextCite beta=64 on the same GPU, QuoteSum and VeriGran. Carries .gpu/m2.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD TOKENSHAPLEY_CACHE=/tmp/tscache
B=benchmarks
if [ ! -f /tmp/parts/m1/tensors.bin ] || [ ! -d /tmp/data/verigran ]; then echo "FRESH MACHINE"; exit 3; fi
python3 $B/gpu_bench.py unpack /tmp/parts/m1 .gpu/m2 --out /tmp/model30 > $OUT/setup5.log 2>&1 || { cat $OUT/setup5.log; exit 4; }
timeout 150 python3 $B/gpu_bench.py bench --model /tmp/model9 --device cuda --data /tmp/data --questions 14 \
    --skip-tokenshapley --cc-model /tmp/model30 --cc-beta 64 --cc-answers 40 --out $OUT/quotesum_cc64.json > $OUT/quotesum_cc64.log 2>&1
timeout 150 python3 $B/gpu_bench.py bench --model /tmp/model9 --device cuda --dataset verigran --data /tmp/data \
    --skip-tokenshapley --cc-model /tmp/model30 --cc-beta 64 --cc-answers 20 --out $OUT/verigran_cc64.json > $OUT/verigran_cc64.log 2>&1
grep -h -E '"(span_accuracy|answer_accuracy|mean|n_answers|n_spans)"' $OUT/*_cc64.json
tail -3 $OUT/*_cc64.log
