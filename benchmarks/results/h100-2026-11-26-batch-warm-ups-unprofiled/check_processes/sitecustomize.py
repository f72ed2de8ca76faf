import os
if os.environ.get("PROBE_CPROFILE_DIR"):
    import atexit, cProfile, sys, time, resource, json
    _prof = cProfile.Profile()
    _t0 = time.time()
    _prof.enable()
    def _dump():
        _prof.disable()
        d = os.environ["PROBE_CPROFILE_DIR"]
        action = "?"
        try:
            if len(sys.argv) >= 2 and sys.argv[1].endswith(".json"):
                action = json.load(open(sys.argv[1])).get("action", "?")
        except Exception:
            pass
        tag = f"{action}-{os.getpid()}"
        _prof.dump_stats(os.path.join(d, tag + ".prof"))
        ru = resource.getrusage(resource.RUSAGE_SELF)
        with open(os.path.join(d, tag + ".txt"), "w") as f:
            f.write(json.dumps({"argv": sys.argv, "wall": time.time() - _t0,
                                "user": ru.ru_utime, "sys": ru.ru_stime,
                                "env_sim_pass": os.environ.get("WORKBOOK_SIMULATOR_PASS"),
                                "cudasim": os.environ.get("NUMBA_ENABLE_CUDASIM")}))
    atexit.register(_dump)
