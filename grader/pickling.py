"""numba's cloudpickle for sending a notebook's code to another process by value.

:mod:`grader.shipping` (a notebook's objects to a contained check) and
:mod:`grader.gpu_compile.payload` (a simulated kernel to the GPU compiler's process) both
pickle functions by value with numba's copy of cloudpickle, which keeps the code's file
names, and each has its own reductions for what must be rebuilt on the other side. This is
the pickler they share: their reduction first, cloudpickle's after, and a record of the
files of every code object it pickles, whose source lines travel with the objects so that
the other side's messages quote them.
"""

from __future__ import annotations

import functools
import pickle
import types


@functools.cache
def _pickler_class() -> type:
    from numba import cloudpickle

    class RecordingPickler(cloudpickle.Pickler):
        def __init__(self, file, reduce):
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
            self.reduce = reduce
            self.filenames: set[str] = set()

        def reducer_override(self, obj):
            reduced = self.reduce(obj)
            if reduced is not None:
                return reduced
            if isinstance(obj, types.CodeType):
                self.filenames.add(obj.co_filename)
            return super().reducer_override(obj)

    return RecordingPickler


def pickler(file, reduce):
    """A pickler writing to ``file`` that tries ``reduce(obj)`` (a reduction, or None for
    cloudpickle's own) on every object; its ``filenames`` collect the files of the code it
    pickled."""
    return _pickler_class()(file, reduce)
