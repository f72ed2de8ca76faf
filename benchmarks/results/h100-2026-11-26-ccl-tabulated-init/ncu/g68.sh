#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
ncu --set full --import-source no --kernel-name regex:"block_init_compress" --export $OUT/v12 --force-overwrite python3 .whl/v12_prof.py > $OUT/ncu_run.log 2>&1
tail -3 $OUT/ncu_run.log
ncu --import $OUT/v12.ncu-rep --page details > $OUT/v12_details.txt 2>&1
ncu --import $OUT/v12.ncu-rep --page source --csv --print-source sass > $OUT/v12_sass.csv 2>&1
ls -la $OUT; head -c 600 $OUT/v12_sass.csv
