#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
timeout 400 ncu --kernel-name regex:'block_merge_kernel|resolve_rank_kernel|block_write_kernel|blob_stats_block_kernel|init_stats_kernel' --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats --csv --page details python3 benchmarks/results/h100-2026-11-26-ccl-pointer-jumping/ccl_ncu.py > $OUT/ncu_rest.csv 2> $OUT/ncu_rest.err; echo "ncu rc=$?"; wc -l $OUT/ncu_rest.csv; tail -3 $OUT/ncu_rest.err
