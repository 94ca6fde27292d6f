"""vtrn: drive a vtrn board from Python.

    import numpy as np, vtrn
    with vtrn.connect() as dev:              # the socket `vtrn up` started
        a = np.random.rand(128, 256).astype(np.float32)
        b = np.random.rand(256, 64).astype(np.float32)
        c = dev.gemm(a, b, dtype="bf16")     # on chip 0's NeuronCores
        ref = vtrn.dtypes.quantize(a, "bf16") @ vtrn.dtypes.quantize(b.T, "bf16").T

The package is built from proto/ by the project's CMake build into
build/python (PYTHONPATH=build/python), and needs Debian's python3-protobuf
and python3-numpy: run it with /usr/bin/python3 (a pyenv python3 does not see
Debian's modules). Errors are vtrn.VtrnError subclasses whose `code` is the
vtrn CLI's exit code for the same condition.
"""

from . import dtypes
from .client import Allocation, Client, connect, job_state_name, runtime_dir, socket_path
from .errors import (ChipNotReady, Failed, NotRunning, Timeout, UnknownChip, Untrusted, UsageError, VtrnError)

__all__ = [
    "Allocation", "ChipNotReady", "Client", "Failed", "NotRunning", "Timeout", "UnknownChip", "Untrusted", "UsageError",
    "VtrnError", "connect", "dtypes", "job_state_name", "runtime_dir", "socket_path",
]
