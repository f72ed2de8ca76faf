#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/w3.log
timeout 400 python3 .whl/st_run.py w3=.whl/w3_var.py rs4=.whl/rs4_var.py ms=.whl/ms_var.py all=.whl/w3_var.py+.whl/rs4_var.py+.whl/ms_var.py 2>&1 | grep -v Warn | tee -a $OUT/w3.log
