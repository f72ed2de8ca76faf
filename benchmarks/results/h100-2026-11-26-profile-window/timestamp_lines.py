"""Run a command, copying its merged output to stdout and to a log with timestamps."""
import subprocess, sys, time
log = open(sys.argv[1], "a")
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
for line in p.stdout:
    sys.stdout.write(line); sys.stdout.flush()
    log.write(f"{time.monotonic()-t0:9.3f} {line}"); log.flush()
sys.exit(p.wait())
