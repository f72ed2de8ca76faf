#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/pipe.log
date -u | tee -a $OUT/pipe.log
timeout 330 python3 .whl/pipe_var.py v14=.whl/v14_init.py v15=.whl/v15_init.py v16=.whl/v16_init.py v17=.whl/v17_init.py v18=.whl/v18_init.py 2>&1 | grep -v Warning | tee -a $OUT/pipe.log
SIZE=2048 timeout 120 python3 .whl/pipe_var.py v14=.whl/v14_init.py v15=.whl/v15_init.py v16=.whl/v16_init.py v17=.whl/v17_init.py v18=.whl/v18_init.py 2>&1 | grep -v Warning | tee -a $OUT/pipe.log
