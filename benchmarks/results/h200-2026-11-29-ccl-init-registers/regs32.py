INIT_JIT = {"max_registers": 32}
