#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/write.log
timeout 200 python3 .whl/write_var.py 2>&1 | grep -v Warning | tee -a $OUT/write.log
SIZE=2048 timeout 100 python3 .whl/write_var.py 2>&1 | grep -v Warning | tee -a $OUT/write.log
