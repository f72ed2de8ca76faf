"""BlobAnalysis variant: block_init_compress_kernel compiled with INIT_JIT (numba's jit
options, e.g. max_registers=32; set by the file exec'd before this one). The kernel is the
lesson's own source (inspect), compiled again; the simulator's jit takes no such options,
so there it compiles as the lesson's. Exec'd into a copy of the lesson's namespace by
../h200-2026-11-28-ccl-readback-last/run_times.py."""
import inspect as _inspect

import workbook as _workbook

_kernel = block_init_compress_kernel  # noqa: F821  (the lesson's, in the namespace)
_source = _inspect.getsource(getattr(_kernel, "py_func", None) or _kernel.fn)
_options = ", ".join(f"{k}={v!r}" for k, v in INIT_JIT.items())  # noqa: F821
if _workbook.MODE == "gpu":
    _source = _source.replace("@cuda.jit\n", f"@cuda.jit({_options})\n", 1)
exec(_source)
_init_kernel = block_init_compress_kernel  # noqa: F821  (defined by the exec)


class BlobAnalysis(BlobAnalysis):  # noqa: F821
    def label_launches(self, d_image, connectivity):
        launches = super().label_launches(d_image, connectivity)
        if self.labelling == "blocks":
            args = (d_image, self.roots, self.forest, self.links, self.height, self.width,
                    connectivity, self.tables[connectivity])
            launches[0] = lambda: self.launch(("init", _options), _init_kernel, self.grid,
                                              BLOCK, *args)  # noqa: F821
        return launches
