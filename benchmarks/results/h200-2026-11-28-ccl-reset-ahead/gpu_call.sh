#!/bin/bash
# One device call (about 3 min): the variant's results on a GPU, then its times beside the
# lesson's (st_run.py: statistics, label and run, median of 10 between CUDA events).
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
F=benchmarks/results/h200-2026-11-28-ccl-reset-ahead
RUNNER=benchmarks/results/h100-2026-11-26-ccl-stats-registers/variants/st_run.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/ra.log
timeout 120 python3 $F/sequence_check.py $F/reset_ahead_var.py 2>&1 | grep -v Warn | tee -a $OUT/ra.log
CASES=0.3/4,0.5/4,0.59/4,0.1/4,0.9/8 timeout 400 python3 $RUNNER ra=$F/reset_ahead_var.py 2>&1 \
  | grep -v Warn | tee -a $OUT/ra.log
