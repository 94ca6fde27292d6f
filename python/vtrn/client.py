"""A client of vtrnd's Unix socket: the same protocol the vtrn CLI speaks
(proto/README.md), with numpy arrays in and out.

Framing: each message is a little-endian uint32 length and that many bytes
of a packed vtrn.api.Request (to vtrnd) or vtrn.api.Response (from it).
Every request carries an id that its answer echoes; vtrnd may answer
pipelined requests in any order, so answers are matched by id and an early
answer to another request is kept until that request asks for it. A frame
above 4 MiB is a protocol error on both sides, so transfers bigger than one
frame are split into pieces here, as the CLI splits them.

One Client is one connection, and one connection is one vtrnd client: HBM
it allocates (unless allocated detached) and jobs it submits (unless
detached) go away when it closes.
Not thread safe; use one Client per thread.
"""

import json
import os
import socket
import stat
import struct
import time

import numpy as np

from . import dtypes
from . import errors
from .proto import vtrn_api_pb2 as api
from .proto import vtrn_api_hbm_pb2 as api_hbm
from .proto import vtrn_api_jobs_pb2 as api_jobs
from .proto import vtrn_api_reliability_pb2 as api_rel
from .proto import vtrn_types_pb2 as vtypes
from .proto import vtrn_api_qmp_pb2 as api_qmp

# The vtrn.api version this package was written for (driver/lib wire.h kApiMajor/kApiMinor).
API_MAJOR, API_MINOR = 3, 1
MAX_FRAME = 4 << 20
DMA_PIECE = 2 << 20  # bytes per DmaWrite/DmaRead request (the CLI's kDmaPieceBytes)
_HEADER = struct.Struct("<I")


def runtime_dir():
    """$VTRN_RUNTIME_DIR, else ${XDG_RUNTIME_DIR:-/tmp}/vtrn-<uid> (as vtrnd)."""
    d = os.environ.get("VTRN_RUNTIME_DIR")
    if d:
        return d
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return os.path.join(base, f"vtrn-{os.getuid()}")


def socket_path():
    return os.path.join(runtime_dir(), "vtrnd.sock")


def _default_runtime_dir():
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return os.path.join(base, f"vtrn-{os.getuid()}")


def _mode(st):
    return oct(st.st_mode & 0o777)[2:]


def _trusted_server_uid(directory):
    """The uid that may serve the socket in `directory`, as the CLI decides
    (driver/lib/client.cpp): a real directory only its owner can write,
    owned by us or root, or (a directory the caller named) by a user whose
    group, the directory's, is one of ours: a board shared through
    `vtrnd --group`. Raises Untrusted otherwise."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        raise errors.NotRunning(f"vtrnd is not running (no directory {directory})")
    if not stat.S_ISDIR(st.st_mode):
        raise errors.Untrusted(f"runtime directory {directory} is not a directory (a symlink or file)")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise errors.Untrusted(f"runtime directory {directory} is writable by other users (mode {_mode(st)})")
    me = os.getuid()
    if st.st_uid in (me, 0):
        return st.st_uid
    groups = set(os.getgroups()) | {os.getgid(), os.getegid()}
    if directory != _default_runtime_dir() and st.st_gid in groups:
        return st.st_uid
    raise errors.Untrusted(f"runtime directory {directory} belongs to uid {st.st_uid}, not to you (uid {me})")


_KERNELS = {
    "gemm": vtypes.JOB_KERNEL_GEMM,
    "add": vtypes.JOB_KERNEL_ADD,
    "mul": vtypes.JOB_KERNEL_MUL,
    "gelu": vtypes.JOB_KERNEL_GELU,
    "softmax": vtypes.JOB_KERNEL_SOFTMAX,
    "sum": vtypes.JOB_KERNEL_SUM,
}
_ENGINES = {
    "default": vtypes.JOB_ENGINE_DEFAULT,
    "tensor": vtypes.JOB_ENGINE_TENSOR,
    "cores": vtypes.JOB_ENGINE_CORES,
}

_DTYPES = {
    dtypes.F32: vtypes.JOB_DTYPE_F32,
    dtypes.BF16: vtypes.JOB_DTYPE_BF16,
    dtypes.FP8_E4M3: vtypes.JOB_DTYPE_FP8_E4M3,
    dtypes.FP8_E5M2: vtypes.JOB_DTYPE_FP8_E5M2,
    dtypes.MXFP4: vtypes.JOB_DTYPE_MXFP4,
}
_CATEGORIES = {
    "tensors": api_hbm.HBM_CATEGORY_TENSORS,
    "code": api_hbm.HBM_CATEGORY_CODE,
    "scratch": api_hbm.HBM_CATEGORY_SCRATCH,
    "collectives": api_hbm.HBM_CATEGORY_COLLECTIVES,
    "dma-buffers": api_hbm.HBM_CATEGORY_DMA_BUFFERS,
}
_FAULTS = {
    "hang": api_rel.FAULT_KIND_HANG,
    "panic": api_rel.FAULT_KIND_PANIC,
    "dma-corrupt": api_rel.FAULT_KIND_DMA_CORRUPT,
    "qemu-kill": api_rel.FAULT_KIND_QEMU_KILL,
    "stall": api_rel.FAULT_KIND_STALL,
}
_JOB_END = {vtypes.JOB_STATE_DONE, vtypes.JOB_STATE_FAILED, vtypes.JOB_STATE_CANCELLED,
            vtypes.JOB_STATE_TIMED_OUT}


def job_state_name(state):
    """"DONE", "FAILED", ... as the CLI prints them."""
    return vtypes.JobState.Name(state)[len("JOB_STATE_"):]


def _check_chip(chip):
    if not isinstance(chip, (int, np.integer)) or isinstance(chip, bool) or chip < 0 or chip >= 2 ** 32:
        raise errors.UsageError(f"chip must be an integer from 0, not {chip!r}")
    return int(chip)


def _check_u64(name, value, low=0):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not low <= value < 2 ** 64:
        raise errors.UsageError(f"{name} must be an integer in {low}..2^64-1, not {value!r}")
    return int(value)


class Allocation:
    """HBM that this connection holds on one chip. free() (or leaving a
    `with` block) gives it back; closing the connection frees it too, unless
    it is detached (the tenant's: any connection of its uid frees it by
    address)."""

    def __init__(self, client, chip, addr, nbytes, detached=False):
        self.client, self.chip, self.addr, self.nbytes = client, chip, addr, nbytes
        self.detached = detached
        self._live = True

    def write(self, data, offset=0):
        return self.client.write(self.chip, self.addr + offset, data)

    def read(self, nbytes=None, dtype=np.uint8, offset=0, shape=None):
        n = self.nbytes - offset if nbytes is None else nbytes
        return self.client.read(self.chip, self.addr + offset, n, dtype=dtype, shape=shape)

    def free(self):
        if self._live:
            self._live = False
            self.client.free(self.chip, self.addr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __repr__(self):
        return f"Allocation(chip={self.chip}, addr=0x{self.addr:x}, bytes={self.nbytes})"


class Client:
    """One connection to vtrnd. `path` defaults to the socket the CLI uses;
    `timeout` (seconds) bounds each answer unless a call says otherwise."""

    def __init__(self, path=None, timeout=30.0):
        self._sock = None
        self.path = path or socket_path()
        self.timeout = timeout
        self._next_id = 1
        self._early = {}
        self._buf = bytearray()
        owner = _trusted_server_uid(os.path.dirname(self.path) or ".")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(self.path)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            self._sock.close()
            raise errors.NotRunning(f"vtrnd is not running (no socket at {self.path}: {e.strerror})")
        except OSError as e:
            self._sock.close()
            raise errors.Failed(f"cannot connect to {self.path}: {e.strerror}")
        creds = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _ = struct.unpack("3i", creds)
        if uid not in (os.getuid(), 0, owner):
            self._sock.close()
            self._sock = None
            raise errors.Untrusted(f"the server at {self.path} runs as uid {uid} (pid {pid}), "
                                   f"not as uid {owner} who owns its directory")

    def close(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _send(self, req):
        data = req.SerializeToString()
        if len(data) > MAX_FRAME:
            raise errors.UsageError(f"request of {len(data)} bytes is above the {MAX_FRAME}-byte frame limit")
        try:
            self._sock.sendall(_HEADER.pack(len(data)) + data)
        except OSError as e:
            raise errors.NotRunning(f"vtrnd closed the connection ({e.strerror})")

    def _recv_frame(self, deadline):
        while True:
            if len(self._buf) >= 4:
                (n,) = _HEADER.unpack_from(self._buf)
                if n > MAX_FRAME:
                    raise errors.Failed(f"vtrnd sent a {n}-byte frame, above the {MAX_FRAME}-byte limit")
                if len(self._buf) >= 4 + n:
                    frame = bytes(self._buf[4:4 + n])
                    del self._buf[:4 + n]
                    resp = api.Response()
                    resp.ParseFromString(frame)
                    return resp
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise errors.Timeout("timed out waiting for vtrnd")
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(1 << 20)
            except socket.timeout:
                raise errors.Timeout("timed out waiting for vtrnd")
            except OSError as e:
                raise errors.NotRunning(f"vtrnd closed the connection ({e.strerror})")
            if not chunk:
                raise errors.NotRunning("vtrnd closed the connection")
            self._buf += chunk

    def send(self, body, message):
        """Sends Request{body: message} and returns its id (for pipelining;
        take the answer with receive(id))."""
        req = api.Request(id=self._next_id)
        self._next_id += 1
        getattr(req, body).CopyFrom(message)
        self._send(req)
        return req.id

    def receive(self, request_id, timeout=None):
        """The Response to request_id; answers to other ids that arrive
        first are kept for them. Raises the mapped VtrnError on a non-OK
        status."""
        t = self.timeout if timeout is None else timeout
        deadline = None if t is None else time.monotonic() + t
        while request_id not in self._early:
            resp = self._recv_frame(deadline)
            self._early.setdefault(resp.id, []).append(resp)
        queue = self._early[request_id]
        resp = queue.pop(0)
        if not queue:
            del self._early[request_id]
        if resp.status != api.STATUS_OK:
            raise errors.status_error(api, resp.status, resp.error)
        return resp

    def call(self, body, message, timeout=None):
        """One request and its answer's body message."""
        resp = self.receive(self.send(body, message), timeout=timeout)
        which = resp.WhichOneof("body")
        if which != body:
            raise errors.Failed(f"vtrnd answered {body} with {which or 'no body'}")
        return getattr(resp, body)

    def hello(self):
        """HelloResponse: the API version this vtrnd speaks (api_major must
        be API_MAJOR), its frame limit and the requests it serves."""
        return self.call("hello", api.HelloRequest(client_api_major=API_MAJOR, client_api_minor=API_MINOR,
                                                   client="vtrn-python"))

    def board(self):
        """ListResponse: the board's model, its file and every chip's summary."""
        return self.call("list", api.ListRequest())

    def chips(self):
        """ChipSummary of every chip, in id order."""
        return list(self.board().chips)

    def info(self, chip):
        return self.call("info", api.InfoRequest(chip=_check_chip(chip))).info

    def ping(self, chip, count=1, payload_bytes=0, spin=False):
        """Control-queue round trips in nanoseconds (numpy uint64 array)."""
        if not 1 <= count <= 100000:
            raise errors.UsageError(f"count must be 1..100000, not {count}")
        if not 0 <= payload_bytes <= 1024:
            raise errors.UsageError(f"payload_bytes must be 0..1024, not {payload_bytes}")
        r = self.call("ping", api.PingRequest(
            chip=_check_chip(chip), count=count, payload_bytes=payload_bytes,
            wait=api.WAIT_SPIN_BLOCK if spin else api.WAIT_BLOCK), timeout=max(self.timeout, count * 1.0))
        return np.array(r.rtt_ns, dtype=np.uint64)

    def monitor(self, chip, command):
        """The text a human-monitor command prints on the chip's QEMU
        ("info pci"); vtrnd passes its read-only allow list only, unless it
        runs with --allow-qmp-write (errors.Failed otherwise)."""
        return self.call("qmp", api_qmp.QmpRequest(chip=_check_chip(chip), hmp=command)).output

    def qmp(self, chip, execute, arguments=None):
        """A raw QMP command on the chip's QEMU; its "return" value, decoded."""
        cmd = {"execute": execute}
        if arguments is not None:
            cmd["arguments"] = arguments
        r = self.call("qmp", api_qmp.QmpRequest(chip=_check_chip(chip), qmp_json=json.dumps(cmd)))
        return json.loads(r.return_json)

    def logs(self, chip, tail=0):
        """The chip's firmware log lines (the last `tail`, 0 = all kept)."""
        rid = self.send("logs", api.LogsRequest(chip=_check_chip(chip), tail=tail))
        lines = []
        while True:  # frames of up to 512 lines, the last marked end
            frame = self.receive(rid).logs
            lines += frame.lines
            if frame.end:
                return lines

    def telemetry(self, chip=None):
        """Telemetry of one chip, or a list for every READY chip (chip=None)."""
        req = api.TelemetryRequest() if chip is None else api.TelemetryRequest(chip=_check_chip(chip))
        r = self.call("telemetry", req)
        return list(r.chips) if chip is None else r.chips[0]

    def watch_telemetry(self, chip=None, interval=1.0, count=None):
        """Yields telemetry every `interval` seconds (`count` times, or
        until the caller stops iterating)."""
        if interval <= 0:
            raise errors.UsageError(f"interval must be above 0 s, not {interval}")
        n = 0
        next_t = time.monotonic()
        while count is None or n < count:
            yield self.telemetry(chip)
            n += 1
            next_t += interval
            time.sleep(max(0.0, next_t - time.monotonic()))

    def alloc(self, chip, nbytes, align=0, category="tensors", detached=False):
        """An Allocation of at least nbytes on the chip; detached=True makes
        it the tenant's, so it outlives this connection."""
        if category not in _CATEGORIES:
            raise errors.UsageError(f"category must be one of {', '.join(_CATEGORIES)}, not {category!r}")
        nbytes = _check_u64("nbytes", nbytes, low=1)
        align = _check_u64("align", align)
        r = self.call("hbm_alloc", api_hbm.HbmAllocRequest(
            chip=_check_chip(chip), bytes=nbytes, align=align, category=_CATEGORIES[category],
            detached=bool(detached)))
        return Allocation(self, int(chip), r.addr, r.bytes, detached=bool(detached))

    def free(self, chip, addr):
        return self.call("hbm_free", api_hbm.HbmFreeRequest(chip=_check_chip(chip), addr=_check_u64("addr", addr)))

    def hbm_stats(self, chip):
        return self.call("hbm_stats", api_hbm.HbmStatsRequest(chip=_check_chip(chip)))

    def hbm_allocations(self, chip):
        return list(self.call("hbm_list", api_hbm.HbmListRequest(chip=_check_chip(chip))).allocations)

    def write(self, chip, addr, data):
        """DMAs `data` (bytes or any numpy array, as its raw bytes) to HBM at
        addr; returns the bytes written."""
        chip = _check_chip(chip)
        addr = _check_u64("addr", addr)
        raw = memoryview(np.ascontiguousarray(data).view(np.uint8).reshape(-1) if isinstance(data, np.ndarray)
                         else bytes(data))
        if len(raw) == 0:
            raise errors.UsageError("nothing to write (0 bytes)")
        ids = []
        for off in range(0, len(raw), DMA_PIECE):
            piece = raw[off:off + DMA_PIECE]
            ids.append(self.send("dma_write", api.DmaWriteRequest(chip=chip, hbm_addr=addr + off, data=bytes(piece))))
        for rid in ids:
            self.receive(rid)
        return len(raw)

    def read(self, chip, addr, nbytes, dtype=np.uint8, shape=None):
        """DMAs nbytes from HBM at addr into a numpy array of `dtype`
        (reshaped to `shape` when given)."""
        chip = _check_chip(chip)
        addr = _check_u64("addr", addr)
        nbytes = _check_u64("nbytes", nbytes, low=1)
        out = bytearray()
        ids = []
        for off in range(0, nbytes, DMA_PIECE):
            n = min(DMA_PIECE, nbytes - off)
            ids.append((n, self.send("dma_read", api.DmaReadRequest(chip=chip, hbm_addr=addr + off, length=n))))
        for n, rid in ids:
            data = self.receive(rid).dma_read.data
            if len(data) != n:
                raise errors.Failed(f"chip {chip}: DMA read of {n} bytes returned {len(data)}")
            out += data
        arr = np.frombuffer(bytes(out), dtype=dtype)
        return arr.reshape(shape) if shape is not None else arr

    def submit(self, buffers, steps, chip=0, name="", priority=0, timeout_ms=0, max_cores=0, wait=False,
               detach=False, timeout=None, engine="default"):
        """Submits a job: `buffers` is a list of dicts {name, bytes | data,
        output}, `steps` a list of dicts with JobStep's fields (kernel and
        dtype by name: "gemm", "bf16", ...); `engine` where its GEMM steps
        run ("tensor", "cores", or "default": the chip's choice). Returns the
        JobSubmitResponse (job info, and the outputs when wait and DONE)."""
        if engine not in _ENGINES:
            raise errors.UsageError(f"engine must be one of {', '.join(_ENGINES)}, not {engine!r}")
        req = api_jobs.JobSubmitRequest(chip=_check_chip(chip), name=name, priority=priority,
                                        timeout_ms=timeout_ms, max_cores=max_cores, wait=wait, detach=detach,
                                        engine=_ENGINES[engine])
        for b in buffers:
            data = b.get("data", b"")
            if isinstance(data, np.ndarray):
                data = np.ascontiguousarray(data).tobytes()
            req.buffers.add(name=b["name"], bytes=b.get("bytes", len(data)), data=data,
                            output=b.get("output", False))
        for s in steps:
            fields = dict(s)
            kernel = fields.pop("kernel")
            if kernel not in _KERNELS:
                raise errors.UsageError(f"kernel must be one of {', '.join(_KERNELS)}, not {kernel!r}")
            dtype = _DTYPES[dtypes.canonical(fields.pop("dtype", dtypes.F32))]
            req.steps.add(kernel=_KERNELS[kernel], dtype=dtype, **fields)
        limit = timeout if timeout is not None else (max(self.timeout, (timeout_ms or 60000) / 1000 + 30)
                                                     if wait else self.timeout)
        return self.call("job_submit", req, timeout=limit)

    def wait_job(self, job_id, timeout_ms=0):
        limit = None if timeout_ms == 0 else timeout_ms / 1000 + self.timeout
        return self.call("job_wait", api_jobs.JobWaitRequest(job_id=job_id, timeout_ms=timeout_ms),
                         timeout=limit).job

    def job(self, job_id):
        return self.call("job_show", api_jobs.JobShowRequest(job_id=job_id)).job

    def jobs(self, chip=None, active_only=False):
        req = api_jobs.JobListRequest(active_only=active_only)
        if chip is not None:  # unset: every chip
            req.chip = _check_chip(chip)
        return list(self.call("job_list", req).jobs)

    def cancel(self, job_id):
        return self.call("job_cancel", api_jobs.JobCancelRequest(job_id=job_id)).job

    def _run(self, chip, buffers, step, out_shape, timeout_ms, engine="default"):
        r = self.submit(buffers, [step], chip=chip, wait=True, timeout_ms=timeout_ms, engine=engine)
        if r.job.state != vtypes.JOB_STATE_DONE:
            raise errors.Failed(f"job {r.job.id} on chip {chip} ended {job_state_name(r.job.state)}: {r.job.reason}")
        out = {o.name: o.data for o in r.outputs}["out"]
        return np.frombuffer(out, dtype=np.float32).reshape(out_shape).copy()

    def gemm(self, a, b, dtype="fp32", chip=0, timeout_ms=0, engine="default"):
        """C = a @ b on the chip: a [m, k] and b [k, n] float arrays are
        rounded to `dtype` (dtypes.quantize shows the values the chip uses),
        multiplied with fp32 accumulation (on the tensor engines, the chip's
        default, or `engine="cores"`), C comes back float32 [m, n]."""
        a = np.asarray(a, dtype=np.float32)
        b = np.asarray(b, dtype=np.float32)
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise errors.UsageError(f"gemm needs a [m, k] and b [k, n], not {a.shape} and {b.shape}")
        m, k = a.shape
        n = b.shape[1]
        dtype = dtypes.canonical(dtype)
        a_data, a_scales = dtypes.encode(a, dtype)
        b_data, b_scales = dtypes.encode(np.ascontiguousarray(b.T), dtype)
        bufs = [{"name": "a", "data": a_data}, {"name": "b", "data": b_data},
                {"name": "out", "bytes": m * n * 4, "output": True}]
        step = {"kernel": "gemm", "dtype": dtype, "m": m, "n": n, "k": k, "a": "a", "b": "b", "out": "out"}
        if dtype == dtypes.MXFP4:
            bufs += [{"name": "as", "data": a_scales}, {"name": "bs", "data": b_scales}]
            step.update(a_scales="as", b_scales="bs")
        return self._run(chip, bufs, step, (m, n), timeout_ms, engine)

    def _elementwise(self, kernel, chip, timeout_ms, a, b=None):
        a = np.ascontiguousarray(a, dtype=np.float32)
        if a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2:
            raise errors.UsageError(f"{kernel} takes a 1-D or 2-D array, not {a.ndim}-D")
        m, n = a.shape
        bufs = [{"name": "a", "data": a}]
        step = {"kernel": kernel, "m": m, "n": n, "a": "a", "out": "out"}
        if b is not None:
            b = np.ascontiguousarray(b, dtype=np.float32).reshape(a.shape)
            bufs.append({"name": "b", "data": b})
            step["b"] = "b"
        out_shape = (m,) if kernel == "sum" else (m, n)
        bufs.append({"name": "out", "bytes": int(np.prod(out_shape)) * 4, "output": True})
        return self._run(chip, bufs, step, out_shape, timeout_ms)

    def add(self, a, b, chip=0, timeout_ms=0):
        return self._elementwise("add", chip, timeout_ms, a, b)

    def mul(self, a, b, chip=0, timeout_ms=0):
        return self._elementwise("mul", chip, timeout_ms, a, b)

    def gelu(self, a, chip=0, timeout_ms=0):
        return self._elementwise("gelu", chip, timeout_ms, a)

    def softmax(self, a, chip=0, timeout_ms=0):
        """Row softmax of a 2-D float32 array."""
        return self._elementwise("softmax", chip, timeout_ms, a)

    def sum(self, a, chip=0, timeout_ms=0):
        """Row sums of a 2-D float32 array."""
        return self._elementwise("sum", chip, timeout_ms, a)

    def _collective(self, op, inputs, timeout_ms):
        arrays = [np.ascontiguousarray(x, dtype=np.float32).reshape(-1) for x in inputs]
        if not arrays or any(len(x) != len(arrays[0]) for x in arrays):
            raise errors.UsageError("one input per chip, all of the same length")
        r = self.call("collective", api_jobs.CollectiveRequest(
            op=op, bytes=arrays[0].nbytes, inputs=[x.tobytes() for x in arrays], timeout_ms=timeout_ms,
            return_outputs=True), timeout=max(self.timeout, (timeout_ms or 60000) / 1000 + 30))
        if r.state != vtypes.JOB_STATE_DONE:
            raise errors.Failed(f"collective ended {job_state_name(r.state)}: {r.reason}")
        return [np.frombuffer(c.output, dtype=np.float32).copy() for c in r.chips]

    def allreduce(self, inputs, timeout_ms=0):
        """Sum of every chip's float32 input (one per chip, in chip id
        order), in the documented ring order; returns each chip's output."""
        return self._collective(vtypes.COLLECTIVE_OP_ALL_REDUCE, inputs, timeout_ms)

    def allgather(self, inputs, timeout_ms=0):
        return self._collective(vtypes.COLLECTIVE_OP_ALL_GATHER, inputs, timeout_ms)

    def reset(self, chip, timeout=120.0):
        """Resets the chip through QMP and waits until it is READY again."""
        return self.call("chip_reset", api_rel.ChipResetRequest(chip=_check_chip(chip)), timeout=timeout)

    def inject(self, chip, kind, queue=-1):
        """Injects a fault: "hang", "panic", "stall", "dma-corrupt" or
        "qemu-kill"; the watchdog then resets the chip."""
        if kind not in _FAULTS:
            raise errors.UsageError(f"fault must be one of {', '.join(_FAULTS)}, not {kind!r}")
        return self.call("fault_inject", api_rel.FaultInjectRequest(chip=_check_chip(chip), kind=_FAULTS[kind],
                                                                    queue=queue))


def connect(path=None, timeout=30.0):
    """A Client on vtrnd's socket (the one `vtrn` uses unless `path` says)."""
    return Client(path, timeout)
