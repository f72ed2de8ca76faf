#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/unsigned.log
timeout 200 python3 .whl/pipe_var.py v19=.whl/v19_init.py 2>&1 | grep -v Warn | tee -a $OUT/unsigned.log
SIZES=8192 timeout 200 python3 .whl/st_run.py st3=.whl/st_var3.py 2>&1 | grep -v Warn | tee -a $OUT/unsigned.log
