#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/pipe.log
date -u | tee -a $OUT/pipe.log
timeout 300 python3 .whl/pipe_var.py v9=.whl/v9_init.py v10=.whl/v10_init.py 2>&1 | grep -v Warning | tee -a $OUT/pipe.log
SIZE=2048 timeout 200 python3 .whl/pipe_var.py v9=.whl/v9_init.py v10=.whl/v10_init.py 2>&1 | grep -v Warning | tee -a $OUT/pipe.log
