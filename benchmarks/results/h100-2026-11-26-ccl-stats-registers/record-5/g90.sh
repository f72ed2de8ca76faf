#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
date -u | tee -a $OUT/device.txt
timeout 240 python3 -m pytest -o addopts="" -p no:cacheprovider -q -n 0 tests/test_ccl_fused.py tests/test_ccl_exercises.py -k "fused or tile_roots or init_table or which_init or both_labellings or one_instance or phases or prepares or image_after_image or labellings or packed" 2>&1 | tail -3 | tee $OUT/gpu_tests.log
timeout 150 python3 benchmarks/ccl.py /tmp/cclout --record > $OUT/ccl.log 2>&1; echo "rc=$?" >> $OUT/ccl.log; cp /tmp/cclout/ccl.json /tmp/cclout/ccl.md $OUT/ 2>/dev/null; tail -2 $OUT/ccl.log
timeout 100 python3 benchmarks/end_to_end.py --lessons ccl --json $OUT/end_to_end.json > $OUT/end_to_end.log 2>&1; echo "rc=$?" >> $OUT/end_to_end.log; grep "done at\|rc=" $OUT/end_to_end.log
mkdir -p $OUT/data; cp workbook/data/05_ccl.json $OUT/data/
