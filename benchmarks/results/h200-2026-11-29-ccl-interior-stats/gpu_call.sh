#!/bin/bash
# One device call: the interior-blob flush (and with it the masked hash) beside the lesson's
# run, 8192² and 2048², 20 images each on one object per variant (run_times.py).
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
D=benchmarks/results/h200-2026-11-29-ccl-interior-stats
R=benchmarks/results/h200-2026-11-28-ccl-readback-last/run_times.py
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/times.log
timeout 420 python3 $R interior=$D/interior_stats_var.py \
  interior_and=$D/interior_stats_var.py+$D/and_hash_var.py 2>&1 | grep -v Warn | tee -a $OUT/times.log
