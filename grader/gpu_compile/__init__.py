"""In simulator mode, the kernels of each checked exercise are also compiled for the GPU.

The simulator runs kernels as Python, so it accepts code that numba-cuda's compiler
rejects (a list or a dict inside a kernel, a call of a plain Python function, try/except,
recursion, wrong types). The compiler itself runs without a GPU (NVVM comes with the
``numba-cuda[cu13]`` wheels), in a process of its own: numba picks the simulator or the
compiler once per process. The modules, by job:

* :mod:`.step` -- the check's hook: each kernel compiles for sm_90, with the types of its
  first launch, while the simulator runs the cases; a rejected kernel fails the exercise
  with the compiler's reason;
* :mod:`.launches` -- the first launch of each kernel and the types of its arguments;
* :mod:`.payload` -- a simulated kernel, with its device and foreign functions, sent to
  the compiler's process;
* :mod:`.client` and :mod:`.worker` -- the compile worker, started once per process on
  first use, and the cache of its verdicts (checking unchanged code compiles nothing);
* :mod:`.target` -- the real compiler without a GPU (also used by tests/sm90_compile.py);
* :mod:`.diagnosis` -- the compiler's message cut to the student's line and explained.

Cost, measured on the two-core development machine while other work loaded it (load
average 10-20): a kernel compiles in 0.1-0.5 s on an idle machine (1-4 s under that load)
beside the simulator, which runs the cases meanwhile; the check then waits for the
verdicts after its last case: 0 s for every solution of lessons 03-05, at most 0.3 s in
lessons 01-02. The worker starts in about 1 s, early (a notebook's setup cell, the
grader's process). Checking unchanged code asks the compiler nothing (1-2 ms to pack the
kernel and find its verdict). A check whose case fails waits for the compile.
"""
