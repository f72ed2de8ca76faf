#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
df -h /tmp | tail -1; findmnt -T /tmp -o FSTYPE,SOURCE | tail -1
python3 - <<'PY'
import os, time, tempfile
d = tempfile.mkdtemp()
f = open(os.path.join(d, "x"), "a", buffering=1)
t = time.time()
for i in range(200):
    f.write("{}\n"); f.flush(); os.fsync(f.fileno())
print(f"fsync /tmp: {(time.time()-t)/200*1e3:.3f} ms each")
PY
export PYTHONPATH=$PWD/.whl/probe:$PYTHONPATH
mkdir -p /tmp/single
BATCH_PROBE_DIR=/tmp/single BATCH_PROBE_CPROFILE=1 timeout 200 python3 -c "from grader.cli import app; app()" check solutions/02_reduction/reduction.ipynb --mode gpu > $OUT/single.log 2>&1; echo single rc=$?
tar czf $OUT/single.tgz -C /tmp single
run() { name=$1; shift; mkdir -p /tmp/$name /tmp/tl-$name; BATCH_PROBE_DIR=/tmp/tl-$name timeout 200 env "$@" python3 benchmarks/batch_throughput.py --out /tmp/$name --copies 24 --buggy 3 --lessons 02_reduction > $OUT/$name.log 2>&1; echo "$name rc=$?"; head -3 /tmp/$name/batch_throughput.md | grep -i "exercises\|CPU" | head -3; cp /tmp/$name/batch_throughput.md $OUT/$name.md 2>/dev/null; cp /tmp/$name/batch_throughput.json $OUT/$name.json 2>/dev/null; tar czf $OUT/tl-$name.tgz -C /tmp tl-$name; }
run base X=1
run nofsync BATCH_PROBE_NO_FSYNC=1
