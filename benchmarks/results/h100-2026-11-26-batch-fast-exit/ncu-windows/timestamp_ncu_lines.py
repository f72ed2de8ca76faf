import subprocess, sys, time
log = open(sys.argv[1], "a")
log.write(f"{time.time():.3f} START\n"); log.flush()
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
for line in p.stdout:
    sys.stdout.write(line); sys.stdout.flush()
    if "==PROF==" in line or "==ERROR==" in line or "==WARNING==" in line:
        log.write(f"{time.time():.3f} {line[:160].rstrip()}\n"); log.flush()
rc = p.wait()
log.write(f"{time.time():.3f} END {rc}\n")
sys.exit(rc)
