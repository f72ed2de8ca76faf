"""Sample /proc/locks: the share of time each nsight-compute-lock file is held."""
import glob
import json
import os
import sys
import time

out, seconds = sys.argv[1], float(sys.argv[2])
held, total, start = {}, 0, time.time()
while time.time() - start < seconds:
    files = glob.glob("/tmp/workbook-*-gpu-*/nsight-compute-lock") + glob.glob("/tmp/nsight-compute-lock")
    inodes = {}
    for f in files:
        try:
            inodes[os.stat(f).st_ino] = f
        except OSError:
            pass
    try:
        text = open("/proc/locks").read()
    except OSError:
        text = ""
    now_held = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) > 5 and parts[1] in ("FLOCK", "POSIX", "OFDLCK"):
            ino = int(parts[5].split(":")[-1])
            if ino in inodes:
                now_held.add(inodes[ino])
    total += 1
    for f in inodes.values():
        held.setdefault(f, 0)
    for f in now_held:
        held[f] += 1
    time.sleep(0.05)
    json.dump({"samples": total, "held_share": {f: round(n / total, 3) for f, n in held.items()}},
              open(out, "w"), indent=1)
