#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
timeout 200 python3 benchmarks/results/h100-2026-11-26-ccl-tile-unions/init_variants.py time 2>&1 | grep -v Warn | tee $OUT/times.txt
timeout 250 ncu --kernel-name regex:'init_compress|nounion|plainwalk' --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --csv --page details python3 benchmarks/results/h100-2026-11-26-ccl-tile-unions/init_variants.py prof > $OUT/ncu.csv 2> $OUT/ncu.err; echo "ncu rc=$?"; wc -l $OUT/ncu.csv; tail -3 $OUT/ncu.err
