#!/bin/bash
# Nsight Compute on lesson 05's two largest launches at 8192^2 (ccl_prof.py): the init +
# compress and the packed statistics, every section plus the source counters.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
D=benchmarks/results/h200-2026-11-29-ccl-ncu
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|Model name"; } | tee $OUT/machine.txt
timeout 420 ncu --profile-from-start off --clock-control none \
  --kernel-name regex:'^(block_init_compress_kernel|blob_stats_packed)' --set full \
  --import-source no -o $OUT/ccl python3 $D/ccl_prof.py > $OUT/ncu_run.log 2>&1; echo "ncu rc=$?"
tail -6 $OUT/ncu_run.log
ncu --import $OUT/ccl.ncu-rep --page details > $OUT/details.txt 2>&1
ncu --import $OUT/ccl.ncu-rep --page raw --csv > $OUT/raw.csv 2>&1
ncu --import $OUT/ccl.ncu-rep --page source --print-source sass --csv > $OUT/sass.csv 2>&1
ls -la $OUT
