#!/bin/bash
# Call 4 (H200): the device search at 1k-128k context tokens against the host's, cold seconds
# and peak memory, device-vs-host agreement; QuoteSum and VeriGran span accuracy and seconds
# per answer on the GPU. Carries .gpu/common (the dev files, gzipped) and .gpu/m1.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD TOKENSHAPLEY_CACHE=/tmp/tscache
B=benchmarks
mkdir -p /tmp/parts && cp -r .gpu/m1 /tmp/parts/
for s in quotesum verigran nq; do mkdir -p /tmp/data/$s; gunzip -c .gpu/common/data/$s.jsonl.gz > /tmp/data/$s/dev.jsonl; done
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; cat /proc/loadavg
  python3 -c "import numba, numpy, torch, transformers; print(numba.__version__, numpy.__version__, torch.__version__, transformers.__version__)"
  ls /root/.cache/huggingface 2>&1; find / -xdev \( -name "*.safetensors" -o -name "*.gguf" \) -size +1G 2>/dev/null | head
  time python3 $B/gpu_bench.py unpack .gpu/m1 --out /tmp/model9; } > $OUT/setup.log 2>&1
timeout 200 python3 $B/gpu_bench.py long --model /tmp/model9 --device cuda --data /tmp/data \
    --sizes 1024 2048 4096 8192 16384 65536 131072 --repeats 5 --agreement 20 --out $OUT/long_cuda.json > $OUT/long_cuda.log 2>&1
timeout 110 python3 $B/gpu_bench.py bench --model /tmp/model9 --device cuda --data /tmp/data --order-control \
    --out $OUT/quotesum_cuda.json > $OUT/quotesum_cuda.log 2>&1
timeout 130 python3 $B/gpu_bench.py bench --model /tmp/model9 --device cuda --dataset verigran --data /tmp/data \
    --order-control --out $OUT/verigran_cuda.json > $OUT/verigran_cuda.log 2>&1
cat /proc/loadavg
grep -v "^ \|^{\|^}\|Loading weights" $OUT/long_cuda.log | tail -20
grep -h -E '"(span_accuracy|accuracy_order_controlled|mean|load_seconds|first_call_seconds)"' $OUT/quotesum_cuda.json $OUT/verigran_cuda.json | head -40
