INIT_JIT = {"launch_bounds": (256, 8)}
