#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/st5.log
timeout 400 python3 .whl/st_run.py st5=.whl/st_var5.py v20=.whl/v20_init.py both=.whl/st_var5.py+.whl/v20_init.py 2>&1 | grep -v Warn | tee -a $OUT/st5.log
