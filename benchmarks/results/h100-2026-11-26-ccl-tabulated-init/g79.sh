#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/final.log
timeout 300 python3 -m pytest -o addopts="" -p no:cacheprovider -q -n 0 tests/test_ccl_fused.py tests/test_ccl_exercises.py -k "fused or tile_roots or init_table or which_init or both_labellings or one_instance or phases or prepares or image_after_image or labellings or packed_statistics_are" 2>&1 | tail -3 | tee -a $OUT/final.log
timeout 200 python3 benchmarks/ccl.py /tmp/cclcheck --densities 0.59 --repeat 3 > $OUT/ccl_check.log 2>&1; echo "rc=$?" | tee -a $OUT/final.log; grep -A14 "launch by launch" /tmp/cclcheck/ccl.md | tail -11 | tee -a $OUT/final.log
