#!/bin/bash
# Call 1: TokenShapley on the truncated (9-block) encoder: GPU fp32, GPU bf16, the machine's CPU.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD/.gpu/common/src TOKENSHAPLEY_CACHE=/tmp/tscache
G=.gpu/common
mkdir -p /tmp/parts && cp -r .gpu/m1 /tmp/parts/
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; cat /proc/loadavg
  python3 -c "import numba, numpy, torch, transformers, tqdm, safetensors, accelerate; print(numba.__version__, numpy.__version__, torch.__version__, transformers.__version__)"
  time python3 $G/gpu_bench.py unpack .gpu/m1 --out /tmp/model9; } > $OUT/setup.log 2>&1
time python3 $G/gpu_bench.py bench --model /tmp/model9 --device cuda --data $G/data --order-control --out $OUT/gpu_fp32.json > $OUT/gpu_fp32.log 2>&1
time python3 $G/gpu_bench.py bench --model /tmp/model9 --device cuda --dtype bfloat16 --data $G/data --out $OUT/gpu_bf16.json > $OUT/gpu_bf16.log 2>&1
time python3 $G/gpu_bench.py bench --model /tmp/model9 --device cpu --data $G/data --out $OUT/devcpu_fp32.json > $OUT/devcpu_fp32.log 2>&1
time python3 $G/gpu_bench.py compare --a /tmp/model9 --b /tmp/model9 --device-a cuda --device-b cpu --data $G/data --answers 40 --out $OUT/compare_cuda_cpu.json > $OUT/compare.log 2>&1
cat /proc/loadavg; ls -la /tmp/parts/m1
grep -h -E '"(span_accuracy|load_seconds|first_call_seconds)"' $OUT/*.json
