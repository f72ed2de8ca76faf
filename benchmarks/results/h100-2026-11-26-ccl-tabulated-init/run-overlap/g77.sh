#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run_var.log
timeout 300 python3 .whl/run_var.py 2>&1 | grep -v Warn | tee -a $OUT/run_var.log
