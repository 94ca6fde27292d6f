"""The vtrn Python package against a real board: vtrnd and two QEMU chips
brought up with the vtrn CLI (the integration harness's Session, so nothing
outlives the module), then driven only through `vtrn.Client`.

Results are checked here, not trusted: GEMMs against a float64 numpy
reference of the decoded inputs with the documented error bound, element by
element; elementwise kernels against numpy; HBM contents byte for byte.
"""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "integration"))
import vtrn_harness as h  # noqa: E402

import vtrn  # noqa: E402
from vtrn import dtypes  # noqa: E402


@pytest.fixture(scope="module")
def board():
    h.require_built()
    h.become_subreaper()
    s = h.Session("py")
    # The production rule: DMA reaches only allocated HBM.
    s.env["VTRN_HBM_DMA_UNCHECKED"] = "0"
    try:
        r = s.vtrn("up", "--chips", "2")
        assert r.returncode == 0, r.stderr
        s.remember_pids()
        yield s
        problems = h.down_and_check(s)
        assert problems == [], problems
    finally:
        s.cleanup()


@pytest.fixture
def dev(board):
    c = vtrn.connect(os.path.join(board.runtime_dir, "vtrnd.sock"), timeout=60)
    yield c
    c.close()


def test_lists_the_board_and_its_ready_chips(dev):
    b = dev.board()
    assert b.board == "vtrn-dev2"
    assert [c.id for c in b.chips] == [0, 1]
    assert all(vtrn.client.api.ChipState.Name(c.state) == "CHIP_STATE_READY" for c in b.chips)
    info = dev.info(1)
    assert info.summary.id == 1 and info.neuron_cores > 0 and info.hbm_stacks > 0
    # Each card at its own host PCI address; the function inside each chip is the same.
    assert [c.pci_bus_id for c in b.chips] == ["0000:10:00.0", "0000:10:01.0"]
    assert info.summary.pci_address == "0000:00:01.0"


def test_the_qemu_monitor_answers_read_only_commands_and_refuses_the_rest(dev):
    assert "PCI device 1af4:1110" in dev.monitor(0, "info pci")
    assert dev.qmp(1, "query-status")["status"] == "running"
    with pytest.raises(vtrn.errors.Failed, match="system_reset"):
        dev.qmp(0, "system_reset")


def test_hello_says_the_api_version_and_what_vtrnd_serves(dev):
    h = dev.hello()
    assert (h.api_major, h.api_minor) == (vtrn.client.API_MAJOR, vtrn.client.API_MINOR)
    assert h.max_frame_bytes == vtrn.client.MAX_FRAME
    assert {"hello", "list", "logs", "telemetry", "dma_write", "hbm_alloc", "job_submit", "qmp"} <= set(h.requests)
    assert h.board == "vtrn-dev2" and h.chips == 2 and h.vtrnd_version


def test_an_unset_chip_is_every_chip_and_an_explicit_0_is_chip_0(dev):
    api = vtrn.client.api
    assert [t.chip for t in dev.call("telemetry", api.TelemetryRequest()).chips] == [0, 1]
    assert [t.chip for t in dev.call("telemetry", api.TelemetryRequest(chip=0)).chips] == [0]
    assert [t.chip for t in dev.call("telemetry", api.TelemetryRequest(chip=-1)).chips] == [0, 1]  # API 1's "every"
    a = np.ones((4, 4), dtype=np.float32)
    dev.add(a, a, chip=1)
    on_1 = {j.id for j in dev.jobs(chip=1)}
    assert on_1 and not on_1 & {j.id for j in dev.jobs(chip=0)}
    assert on_1 <= {j.id for j in dev.jobs()}


def test_ping_returns_one_round_trip_per_ping(dev):
    rtt = dev.ping(0, count=5, payload_bytes=64)
    assert rtt.shape == (5,) and (rtt > 0).all()


def test_telemetry_one_chip_every_chip_and_watching(dev):
    t = dev.telemetry(0)
    assert t.chip == 0 and t.neuron_cores > 0
    assert sorted(x.chip for x in dev.telemetry()) == [0, 1]
    seen = [x.uptime_ns for x in dev.watch_telemetry(chip=1, interval=0.2, count=3)]
    assert len(seen) == 3 and seen[0] < seen[1] < seen[2]


def test_hbm_round_trip_larger_than_one_frame(dev):
    data = np.random.default_rng(1).integers(0, 256, size=5 << 20, dtype=np.uint8)
    with dev.alloc(0, data.nbytes) as buf:
        assert buf.nbytes >= data.nbytes
        assert dev.write(0, buf.addr, data) == data.nbytes
        back = buf.read(data.nbytes)
        assert np.array_equal(back, data)
        as_f32 = buf.read(64, dtype=np.float32)
        assert np.array_equal(as_f32, data[:64].view(np.float32))
        addr = buf.addr
    # Freed: the chip lets DMA reach only live allocations.
    with pytest.raises(vtrn.VtrnError) as e:
        dev.read(0, addr, 4096)
    assert e.value.code == vtrn.errors.FAILED


def test_a_detached_allocation_outlives_its_connection_until_freed_by_address(board):
    sock = os.path.join(board.runtime_dir, "vtrnd.sock")
    a = vtrn.connect(sock, timeout=60)
    buf = a.alloc(0, 1 << 20, detached=True)
    attached = a.alloc(0, 1 << 20)
    assert buf.detached and not attached.detached
    a.write(0, buf.addr, b"\x7e" * 4096)
    a.close()
    with vtrn.connect(sock, timeout=60) as b:
        listed = h.wait_until("the attached allocation freed", lambda: {x.addr: x for x in b.hbm_allocations(0)},
                              lambda v: attached.addr not in v, 30)
        assert buf.addr in listed and listed[buf.addr].detached
        assert bytes(b.read(0, buf.addr, 4096)) == b"\x7e" * 4096
        assert b.free(0, buf.addr).bytes == buf.nbytes
        assert buf.addr not in {x.addr for x in b.hbm_allocations(0)}


@pytest.mark.parametrize("engine", ["default", "cores"])
@pytest.mark.parametrize("dtype", dtypes.NAMES)
def test_gemm_in_every_dtype_matches_numpy_within_the_bound(dev, dtype, engine):
    rng = np.random.default_rng(hash(dtype) & 0xFFFF)
    m, k, n = 48, 96, 40
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = dev.gemm(a, b, dtype=dtype, chip=1, engine=engine)
    assert c.shape == (m, n) and c.dtype == np.float32
    qa = dtypes.quantize(a, dtype).astype(np.float64)
    qb = dtypes.quantize(np.ascontiguousarray(b.T), dtype).astype(np.float64)
    ref = qa @ qb.T
    bound = dtypes.gemm_error_bound(k, np.abs(qa) @ np.abs(qb).T)
    err = np.abs(c.astype(np.float64) - ref)
    assert (err <= bound).all(), f"{(err > bound).sum()} of {m * n} elements outside the bound"
    # The inputs really were rounded to the dtype (a wrong encoding would
    # still multiply, against other values).
    if dtype != dtypes.F32:
        assert not np.array_equal(qa, a.astype(np.float64))


def test_elementwise_kernels_match_numpy(dev):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((8, 50)).astype(np.float32)
    b = rng.standard_normal((8, 50)).astype(np.float32)
    assert np.array_equal(dev.add(a, b), a + b)
    assert np.array_equal(dev.mul(a, b), a * b)
    s = dev.softmax(a)
    e = np.exp(a.astype(np.float64) - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(s, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dev.sum(a), a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
    from math import erf, sqrt
    g = np.vectorize(lambda x: 0.5 * x * (1 + erf(x / sqrt(2))))(a.astype(np.float64))
    np.testing.assert_allclose(dev.gelu(a), g, rtol=1e-5, atol=1e-6)


def test_submit_then_wait_list_and_show_a_job(dev):
    rng = np.random.default_rng(9)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    r = dev.submit([{"name": "a", "data": a}, {"name": "b", "data": a},
                    {"name": "out", "bytes": a.nbytes, "output": True}],
                   [{"kernel": "add", "m": 64, "n": 64, "a": "a", "b": "b", "out": "out"}],
                   chip=0, name="py-add")
    job = dev.wait_job(r.job.id, timeout_ms=30000)
    assert vtrn.job_state_name(job.state) == "DONE"
    assert dev.job(r.job.id).name == "py-add"
    assert r.job.id in [j.id for j in dev.jobs(chip=0)]


def test_pipelined_answers_are_matched_by_id(dev):
    ids = [dev.send("info", vtrn.client.api.InfoRequest(chip=c)) for c in (0, 1, 0)]
    for rid, chip in reversed(list(zip(ids, (0, 1, 0)))):
        assert dev.receive(rid).info.info.summary.id == chip


def test_allreduce_sums_every_chip_bit_for_bit(dev):
    rng = np.random.default_rng(11)
    x = [rng.standard_normal(4096).astype(np.float32) for _ in range(2)]
    out = dev.allreduce(x)
    assert len(out) == 2
    for o in out:
        assert np.array_equal(o, x[0] + x[1])


def test_errors_carry_the_cli_exit_codes(dev, board):
    with pytest.raises(vtrn.UnknownChip) as e:
        dev.info(7)
    assert (e.value.code, e.value.name) == (4, "unknown-chip") and "7" in e.value.message
    with pytest.raises(vtrn.UsageError) as e:
        dev.gemm(np.zeros((4, 8)), np.zeros((4, 8)))
    assert e.value.code == 2
    with pytest.raises(vtrn.UsageError):
        dev.alloc(0, -1)
    with pytest.raises(vtrn.NotRunning) as e:
        vtrn.connect(os.path.join(board.tmp, "no-such.sock"))
    assert e.value.code == 3


def test_reset_brings_the_chip_back_ready(dev):
    gen = dev.telemetry(1).boot_generation
    r = dev.reset(1)
    assert r.boot_generation > gen
    assert dev.info(1).summary.state == vtrn.client.api.CHIP_STATE_READY


@pytest.fixture
def untrusted_dir(tmp_path):
    """A runtime directory of ours with a listening socket in it."""
    d = tmp_path / "rt"
    d.mkdir(mode=0o700)
    servers = []

    def serve(uid=None):
        server = h.ListeningSocket(str(d / "vtrnd.sock"), uid=uid)
        servers.append(server)
        return server

    yield d, serve
    for server in servers:
        server.close()


def test_client_refuses_a_runtime_dir_others_can_write(untrusted_dir):
    d, serve = untrusted_dir
    server = serve()
    d.chmod(0o777)
    with pytest.raises(vtrn.Untrusted, match="writable by other users") as err:
        vtrn.Client(str(d / "vtrnd.sock"))
    assert err.value.code == 7 and err.value.name == "untrusted"
    assert server.received() == 0


def test_client_refuses_a_server_running_as_another_user(untrusted_dir):
    d, serve = untrusted_dir
    server = serve(uid=h.NOBODY_UID)
    with pytest.raises(vtrn.Untrusted, match=f"runs as uid {h.NOBODY_UID}"):
        vtrn.Client(str(d / "vtrnd.sock"))
    assert server.received() == 0


def test_client_refuses_a_runtime_dir_of_another_user(untrusted_dir):
    d, serve = untrusted_dir
    server = serve()
    os.chown(d, h.NOBODY_UID, h.NOBODY_UID)
    with pytest.raises(vtrn.Untrusted, match=f"belongs to uid {h.NOBODY_UID}"):
        vtrn.Client(str(d / "vtrnd.sock"))
    assert server.received() == 0
