#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/fs.log
SIZES=8192 timeout 400 python3 .whl/fs_run.py .whl/fs_var.py 2>&1 | tee -a $OUT/fs.log
