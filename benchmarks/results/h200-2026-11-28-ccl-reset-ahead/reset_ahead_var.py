"""Reset variant: the statistics arrays are reset at the start of a run, for the entries the
last run wrote, on a stream that does not wait for the default stream, so that the reset
runs beside the labelling; the statistics kernel waits for it with an event. Today the
reset runs between the write and the statistics (at 8192², p = 0.3 4-conn, K = 8.6 M: about
310 MB written, some 0.1 ms at the memory's speed, on the critical path)."""
import numpy as np  # noqa: F401


def side_stream():
    """A stream that does not wait for the legacy default stream (the pipeline's): numba's
    cuda.stream() makes blocking ones, which would serialise the reset with the labelling."""
    if workbook.MODE != "gpu":  # noqa: F821
        return cuda.stream()  # noqa: F821
    from cuda.bindings import driver

    cuda.current_context()  # noqa: F821  (the driver call needs numba's context current)
    status, handle = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
    assert status == driver.CUresult.CUDA_SUCCESS, status
    return cuda.external_stream(int(handle))  # noqa: F821


class BlobAnalysis(BlobAnalysis):  # noqa: F821
    def __init__(self, *args, **kwargs):
        self.dirty = 0  # entries of the statistics arrays not in their reset state
        self.reset_stream = side_stream()
        self.reset_done = cuda.event()  # noqa: F821
        self.waiting_for_reset = False
        super().__init__(*args, **kwargs)

    def reserve(self, count):
        old = self.stats
        super().reserve(count)
        if self.stats is not old:  # new arrays: nothing in them is reset
            self.dirty = self.stats["area"].size
            self.waiting_for_reset = False

    def reset_ahead(self):
        """Reset what the last run wrote, on the side stream (called before the labelling)."""
        if self.dirty:
            init_stats_kernel[INIT_BLOCKS, THREADS, self.reset_stream](  # noqa: F821
                *self.fields, self.dirty)
            self.reset_done.record(self.reset_stream)
            self.dirty = 0
            self.waiting_for_reset = True

    def reset(self, count):
        self.reserve(count)
        if self.dirty:  # not reset ahead (new arrays, or statistics() called on its own)
            self.launch("reset", init_stats_kernel, INIT_BLOCKS, THREADS, *self.fields,  # noqa: F821
                        self.dirty)
            self.dirty = 0
        if self.waiting_for_reset:
            self.reset_done.wait(cuda.default_stream())  # noqa: F821
            self.waiting_for_reset = False

    def statistics(self, count, kernel=None):
        stats = super().statistics(count, kernel)
        self.dirty = max(self.dirty, count)
        return stats

    def run(self, d_image, connectivity, kernel=None):
        self.reset_ahead()
        return super().run(d_image, connectivity, kernel)
