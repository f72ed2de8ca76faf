import os
if os.environ.get("PROBE_NCU_LOG_DIR"):
    try:
        import itertools, sys
        import grader.ncu as _ncu
        _orig = _ncu.command
        _count = itertools.count()
        def command(kernels, metrics, report):
            args = _orig(kernels, metrics, report)
            log = os.path.join(os.environ["PROBE_NCU_LOG_DIR"], f"{os.getpid()}-{next(_count)}.log")
            return [sys.executable, os.environ["PROBE_TSW"], log, *args]
        _ncu.command = command
    except Exception as exc:  # noqa
        print("probe_site failed", exc, file=sys.stderr)
