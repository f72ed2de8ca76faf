#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/pipe.log
date -u | tee -a $OUT/pipe.log
timeout 150 python3 .whl/init_var.py v11=.whl/v11_init.py v12=.whl/v12_init.py 2>&1 | grep -v Warn | tee $OUT/init.log
SIZE=2051x2047 timeout 100 python3 .whl/init_var.py v11=.whl/v11_init.py v12=.whl/v12_init.py 2>&1 | grep -v Warn | tee -a $OUT/init.log
timeout 250 python3 .whl/pipe_var.py v11=.whl/v11_init.py v12=.whl/v12_init.py v13=.whl/v13_init.py 2>&1 | grep -v Warning | tee -a $OUT/pipe.log
SIZE=2048 timeout 100 python3 .whl/pipe_var.py v11=.whl/v11_init.py v12=.whl/v12_init.py v13=.whl/v13_init.py 2>&1 | grep -v Warning | tee -a $OUT/pipe.log
