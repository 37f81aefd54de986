#!/bin/bash
# Call 7 (H200): the cost of a 7-8B encoder. No 7-8B weights can reach the machine (no
# network, 64 MiB a call), so `gpu_bench.py bench --shape` builds Llama-3.1-8B's blocks with
# random weights (bfloat16) for timing alone, and SmolLM2-135M's shape (float32) as the same
# machine's baseline; TokenShapley and ContextCite beta=64 run on the same answers. Carries
# .gpu/common (the dev files, gzipped; the SmolLM2 tokenizer and chat template in tok/).
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD TOKENSHAPLEY_CACHE=/tmp/tscache
B="python3 benchmarks/gpu_bench.py bench --model .gpu/common/tok --device cuda --data /tmp/data"
for s in quotesum verigran; do mkdir -p /tmp/data/$s; gunzip -c .gpu/common/data/$s.jsonl.gz > /tmp/data/$s/dev.jsonl; done
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; cat /proc/loadavg
  python3 -c "import numba, numpy, torch, transformers; print(numba.__version__, numpy.__version__, torch.__version__, transformers.__version__)"; } > $OUT/run.log 2>&1
run() { local name=$1 limit=$2; shift 2; echo "== $name: $*" >> $OUT/run.log
  /usr/bin/time -f "$name: %e s wall, %M KB max RSS" timeout $limit $B "$@" --out $OUT/$name.json > $OUT/$name.log 2>>$OUT/run.log
  echo "$name rc=$?" >> $OUT/run.log; grep -v "^ \|^[{}]\|Loading weights" $OUT/$name.log | tail -3 >> $OUT/run.log; }
run qs_8b_l9 150 --shape llama-3.1-8b --dtype bfloat16 --layer 9 --questions 14 --cc-beta 64 --cc-answers 20
run qs_135m_l8 100 --shape smollm2-135m --dtype float32 --layer 8 --questions 14 --cc-beta 64 --cc-answers 20
run vg_8b_l9 120 --shape llama-3.1-8b --dtype bfloat16 --layer 9 --dataset verigran --questions 20 --cc-beta 64 --cc-answers 10
run qs_8b_l32 70 --shape llama-3.1-8b --dtype bfloat16 --layer 32 --questions 14
cat /proc/loadavg >> $OUT/run.log; rm -f $OUT/qs_*.log $OUT/vg_*.log  # at most 8 files come back
python3 - <<'PY' >> $OUT/run.log
import json, glob, os
for f in sorted(glob.glob(os.environ["OUT"] + "/*.json")):
    r = json.load(open(f)); t = r.get("tokenshapley", {}); c = r.get("contextcite", {})
    print(os.path.basename(f), r.get("shape", {}).get("build_seconds"), "TS", t.get("n_answers"),
          {k: round(v.get("mean", 0), 4) for k, v in t.get("seconds", {}).items()}, t.get("first_call_seconds"),
          t.get("cuda_peak_allocated_mib"), "CC", c.get("n_answers"), c.get("seconds", {}).get("mean"))
PY
cat $OUT/run.log
