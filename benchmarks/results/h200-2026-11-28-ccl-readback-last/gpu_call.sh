#!/bin/bash
# One device call: the read-back variant beside the lesson's run, 8192² and 2048², 20 images
# each on one object per variant (run_times.py).
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
D=benchmarks/results/h200-2026-11-28-ccl-readback-last
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/times.log
timeout 400 python3 $D/run_times.py end=$D/readback_last_var.py 2>&1 | grep -v Warn | tee -a $OUT/times.log
