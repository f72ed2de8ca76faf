#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/st.log
timeout 400 python3 .whl/st_run.py v1=.whl/st_var.py v2=.whl/st_var.py+.whl/rs_var.py 2>&1 | grep -v Warn | tee -a $OUT/st.log
