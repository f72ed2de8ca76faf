#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/ncu_logs /tmp/probe
timeout 200 env PYTHONPATH=$PWD/.whl/probe_ncu:$PYTHONPATH PROBE_NCU_LOG_DIR=$OUT/ncu_logs PROBE_TSW=$PWD/.whl/probe_ncu/timestamp_ncu_lines.py python3 benchmarks/batch_throughput.py --out /tmp/probe --copies 24 --buggy 3 --lessons 02_reduction > $OUT/probe.log 2>&1; echo "rc=$?"
head -3 /tmp/probe/batch_throughput.md; cp /tmp/probe/batch_throughput.md /tmp/probe/batch_throughput.json $OUT/ 2>/dev/null; ls $OUT/ncu_logs | wc -l
cd $OUT && tar czf ncu_logs.tgz ncu_logs && rm -rf ncu_logs
