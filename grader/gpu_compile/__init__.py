"""In simulator mode, the kernels of each checked exercise are also compiled for the GPU.

The simulator runs kernels as Python, so it accepts code that numba-cuda's compiler
rejects (a list or a dict inside a kernel, a call of a plain Python function, try/except,
recursion, wrong types). The compiler itself runs without a GPU (NVVM comes with the
``numba-cuda[cu13]`` wheels), in a process of its own: numba picks the simulator or the
compiler once per process. The modules, by job:

* :mod:`.step` -- the check's hook: the first case's kernels compile, for sm_90, while
  the simulator runs them; a rejected kernel fails the exercise with the compiler's reason;
* :mod:`.launches` -- the first launch of each kernel and the types of its arguments;
* :mod:`.payload` -- a simulated kernel, with its device and foreign functions, sent to
  the compiler's process;
* :mod:`.client` and :mod:`.worker` -- the compile worker, started once per process on
  first use, and the cache of its verdicts (checking unchanged code compiles nothing);
* :mod:`.target` -- the real compiler without a GPU (also used by tests/sm90_compile.py);
* :mod:`.diagnosis` -- the compiler's message cut to the student's line and explained.

Cost, measured on the two-core development machine: a correct kernel takes 0.02-0.1 s
to compile once the worker runs, while the simulator runs the first case; the worker
starts in about 1 s (2 s when the simulator competes for the cores), also while the
first case runs. A check of unchanged code asks the compiler nothing.
"""
