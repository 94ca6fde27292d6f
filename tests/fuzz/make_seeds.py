#!/usr/bin/env python3
"""Writes the seed inputs of tests/fuzz/corpus/<harness>/ (seed-* files).

Each harness reads its input front to back as little-endian fields
(fuzz_input.h); the builders below spell out that format, one helper per op,
so a seed reads as the scenario it starts the fuzzer from. The board_dtb
seeds are the shipped boards (board/*.dts and those board/gen_board.py
writes) compiled with dtc. regress-* files in the corpus
are crash inputs kept as regression tests and are never written here.

Usage: tests/fuzz/make_seeds.py   (run from anywhere; needs dtc on PATH)
"""
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def u8(v): return struct.pack('<B', v & 0xff)
def u16(v): return struct.pack('<H', v & 0xffff)
def u32(v): return struct.pack('<I', v & 0xffffffff)
def u64(v): return struct.pack('<Q', v & 0xffffffffffffffff)


def write(harness, name, data):
    d = os.path.join(HERE, 'corpus', harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'seed-' + name), 'wb') as f:
        f.write(data)


# ctrl_ring (ctrl_ring.cpp): geometry bytes, kinds, two indexes, ops.
def ring_cfg(count_log2, size_idx): return u8(count_log2 | size_idx << 2)
def cr_pop(buf): return u8(0) + u16(buf)
def cr_set_prod(v): return u8(1) + u32(v)
def cr_prod_add(d): return u8(2) + u8(d)
def cr_scribble(off, data): return u8(4) + u16(off) + u8(len(data)) + data
def cr_publish(kind, seq, payload): return u8(5) + u8(kind) + u32(seq) + u16(len(payload)) + payload
def cr_pending(): return u8(6)
def cr_reset(i): return u8(7) + u32(i)
def cr_push(kind, seq, payload): return u8(8) + u8(kind) + u32(seq) + u16(len(payload)) + payload
def cr_in_flight(): return u8(11)
def cr_peer_consumes(): return u8(13)


def ctrl_ring():
    head = ring_cfg(2, 2) + ring_cfg(2, 2) + u8(1 << 1)  # 4 x 256 B rings, requests only
    write('ctrl_ring', 'request-response', head + u32(0) + u32(0) +
          cr_publish(1, 7, b'\x12\x00') + cr_pending() + cr_pop(256) +
          cr_push(2, 7, b'\x0a\x02\x08\x01') + cr_peer_consumes() + cr_pop(256))
    write('ctrl_ring', 'wrap-at-2e32', head + u32(0xfffffffe) + u32(0xfffffffe) +
          b''.join(cr_publish(1, s, b'x' * s) + cr_pop(64) for s in range(3)) +
          b''.join(cr_push(2, s, b'y' * s) + cr_peer_consumes() for s in range(3)))
    write('ctrl_ring', 'bad-crc-latches-then-reset', head + u32(5) + u32(0) +
          cr_publish(1, 1, b'payload') + cr_scribble((5 % 4) * 256 + 16, b'!') +
          cr_pop(256) + cr_pop(256) + cr_pending() +
          cr_reset(9) + cr_publish(1, 2, b'ok') + cr_pop(256))
    write('ctrl_ring', 'index-jump', head + u32(100) + u32(0) + cr_set_prod(105) + cr_pop(256) +
          cr_prod_add(1) + cr_pop(256))
    write('ctrl_ring', 'producer-fills-ring', head + u32(0) + u32(0) +
          b''.join(cr_push(3, s, b'event') for s in range(5)) + cr_in_flight() +
          cr_peer_consumes() + cr_push(3, 9, b'after'))
    big = ring_cfg(0, 3) + ring_cfg(0, 3) + u8(0xff) + u32(0) + u32(0)  # one 4 KiB slot
    write('ctrl_ring', 'full-size-slot', big + cr_publish(2, 1, b'z' * 4080) + cr_pop(4080) +
          cr_push(2, 1, b'z' * 4080) + cr_push(2, 2, b'z' * 4081))


# dma_queue (dma_queue.cpp): mode, depth, buffers, ops.
def buffers(hw, hbm, base): return u16(hw - 1) + u16(hbm - 1) + u64(base)
# flag bits as plausible() reads them: 1 FIRST, 2 LAST, 4 IRQ, 8 FENCE,
# 0x10 src host, 0x20 dst host, 0x40 an unknown bit
def desc_fields(src, dst, length, cookie): return u16(src) + u16(dst) + u8(length) + u32(cookie)


def dma_queue():
    base = 0x80000000
    # script 1: one two-descriptor chain host->HBM, one single HBM->host with IRQ
    chain = (u8(0) + u8(1) + u8(0x10) + desc_fields(0, 0, 64, 1) + u8(0x10) +
             desc_fields(64, 64, 64, 2))
    single = u8(0) + u8(0) + u8(0x24) + desc_fields(0, 128, 32, 3)
    write('dma_queue', 'well-formed-chains', u8(1) + u8(2) + buffers(512, 512, base) +
          chain + single + u8(3) + u8(1) + u8(1) + u8(7) + u8(2) + u8(3))
    write('dma_queue', 'well-formed-invalid-and-reset', u8(1) + u8(1) + buffers(256, 256, base) +
          u8(0) + u8(0) + u8(0x30) + desc_fields(0, 8, 16, 4) +   # host->host overlap
          u8(0) + u8(0) + u8(0x10) + desc_fields(250, 0, 16, 5) +  # src past the window
          u8(1) + u8(3) + u8(2) + u8(2) + u8(4) +
          u8(0) + u8(0) + u8(0x20) + desc_fields(0, 0, 0, 6))      # zero length
    # script 0: raw traffic, index abuse, a reset, HBM at the top of the address space
    write('dma_queue', 'hostile-host', u8(0) + u8(2) + buffers(128, 128, 2**64 - 96) + u8(1) +
          u16(16) +
          u8(1) + u8(0) + u8(0x03) + desc_fields(0, 0, 64, 1) +
          u8(1) + u8(1) + u8(0x13) + desc_fields(0, 0, 64, 2) +
          u8(3) + u8(2) + u8(8) + u8(9) + u8(3) + u8(7) + u8(8) + u8(9) +
          u8(6) + u8(1) + u8(8) + u8(4) + u8(2) + u32(1000) + u8(8) + u8(4))
    # script 2: device publishes completions beyond what was submitted
    write('dma_queue', 'hostile-device', u8(2) + u8(2) +
          u8(0) + u8(3) + u8(4) + u8(2) + u8(5) + u8(0) + bytes(16) + u8(6) + u8(3) +
          u8(2) + u8(5) + u8(6) + u8(5) + u8(7) + u8(3) + u32(2) + u8(7) + u8(8) + u8(1))


# layout (layout.cpp): flags, BAR2 size, FwHeader bytes.
REGIONS = [  # type, offset, size for a 4 MiB BAR2, as publish_layout writes them
    (1, 0x1000, 0x1000), (2, 0x2000, 0x2000), (3, 0x4000, 0x1000),
    (4, 0x10000, 32 * 4096), (5, 0x30000, 32 * 4096), (6, 0x50000, 64 + 256 * 1024),
]


def fw_header(bar2, regions, magic=0x4e525456, major=1):
    h = u32(magic) + u16(major) + u16(0) + u32(2) + u32(0x000100) + u64(1) + u64(0xf) + \
        u64(bar2) + u32(0) + u32(len(regions)) + u64(0) + u32(1) + u32(0) + \
        b'fuzz-seed'.ljust(32, b'\0')
    table = b''.join(u32(t) + u32(0) + u64(o) + u64(s) for t, o, s in regions)
    return h + table.ljust(16 * 24, b'\0')


def layout():
    mib = 1 << 20
    full = REGIONS + [(7, 0x100000, 4 * mib - 0x100000)]
    write('layout', 'default-4mib', u8(1) + u64(0) + fw_header(4 * mib, full))
    big = REGIONS + [(7, 0x100000, 64 * mib - 0x100000)]
    write('layout', 'default-64mib-err-small', u8(1 | 2) + u64(0) + fw_header(64 * mib, big))
    write('layout', 'no-host-window', u8(1 | 6) + u64(0) + fw_header(4 * mib, REGIONS))
    overlap = REGIONS + [(7, 0x50000, 4 * mib - 0x50000)]
    write('layout', 'overlap', u8(1) + u64(0) + fw_header(4 * mib, overlap))
    write('layout', 'size-mismatch', u8(0) + u64(8 * mib) + fw_header(4 * mib, full))
    write('layout', 'abi-2', u8(1) + u64(0) + fw_header(4 * mib, full, major=2))


# log_reader (log_reader.cpp): ring size, ops.
def lr_read(cap): return u8(0) + u16(cap)
def lr_set_wp(v): return u8(1) + u64(v)
def lr_line(text): return u8(7) + u8(len(text)) + text
def lr_append(text): return u8(5) + u8(len(text)) + text
def lr_rewind(n): return u8(6) + u64(n)


def log_reader():
    lines = [b'6 %d booted chip %d' % (i * 1000, i) for i in range(12)]
    write('log_reader', 'lines-then-read', u8(4) + b''.join(lr_line(l) for l in lines[:4]) +
          lr_read(4096) + lr_line(lines[4]) + lr_read(10) + lr_read(4096))
    write('log_reader', 'overrun', u8(3) + b''.join(lr_line(l) for l in lines) + lr_read(4096))
    write('log_reader', 'long-line-in-pieces', u8(5) + lr_append(b'x' * 200) + lr_read(64) +
          lr_read(64) + lr_line(b'end') + lr_read(4096))
    write('log_reader', 'rewind-and-restart', u8(4) + b''.join(lr_line(l) for l in lines[:6]) +
          lr_rewind(40) + lr_read(4096) + lr_set_wp(0) + lr_line(lines[0]) + lr_read(4096) +
          u8(8) + u64(2**40) + lr_read(4096))


# ctrl_decode (ctrl_decode.cpp): one vtrn.ctrl.Request payload.
def varint(v):
    out = b''
    while True:
        b = v & 0x7f
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def ctrl_decode():
    def ping(t, payload): return field(1, 2, field(1, 0, varint(t)) + field(2, 2, payload))
    write('ctrl_decode', 'ping', ping(123, b'hello'))
    write('ctrl_decode', 'ping-600', ping(2**63, bytes(range(256)) * 2 + b'p' * 88))
    write('ctrl_decode', 'ping-1025', ping(1, b'q' * 1025))
    write('ctrl_decode', 'info', field(2, 2, b''))
    write('ctrl_decode', 'shutdown', field(3, 2, b''))
    write('ctrl_decode', 'set-log-level-3', field(4, 2, field(1, 0, varint(3))))
    write('ctrl_decode', 'set-log-level-9', field(4, 2, field(1, 0, varint(9))))
    write('ctrl_decode', 'empty', b'')
    write('ctrl_decode', 'unknown-field', field(9, 2, b'future') + field(2, 2, b''))
    write('ctrl_decode', 'two-bodies', field(2, 2, b'') + field(3, 2, b''))
    # One request of every service the firmware's table routes.
    def v(num, value): return field(num, 0, varint(value))
    client1 = 1 << 32 | 1
    write('ctrl_decode', 'hbm-alloc', field(20, 2, v(1, client1) + v(3, 65536) + v(5, 1) + v(6, 1 << 20)))
    write('ctrl_decode', 'hbm-alloc-bad-owner', field(20, 2, v(1, 5 << 32) + v(3, 4096)))
    write('ctrl_decode', 'hbm-free', field(21, 2, v(1, client1) + v(2, 0x44000000)))
    write('ctrl_decode', 'hbm-free-owner', field(22, 2, v(1, client1)))
    write('ctrl_decode', 'hbm-stats', field(23, 2, b''))
    write('ctrl_decode', 'hbm-list', field(24, 2, v(2, 8)))
    write('ctrl_decode', 'hbm-list-too-many', field(24, 2, v(2, 65)))
    write('ctrl_decode', 'hbm-retired', field(25, 2, b''))
    write('ctrl_decode', 'hbm-import-retired',
          field(26, 2, field(1, 2, varint(0x10000) + varint(0x30000)) + v(2, 1)))
    write('ctrl_decode', 'hbm-inject-ecc', field(27, 2, v(1, 0x44010000) + v(2, 1)))
    step = (v(1, 1) + v(2, 1) + v(3, 16) + v(4, 16) + v(5, 32) + v(6, 0x44000000) +
            v(8, 0x44010000) + v(10, 0x44020000))
    write('ctrl_decode', 'job-submit', field(40, 2, v(1, 7) + v(2, 2 << 32 | 7) + v(3, 1) +
                                             v(5, 1000) + field(7, 2, step)))
    write('ctrl_decode', 'job-submit-no-steps', field(40, 2, v(1, 8)))
    write('ctrl_decode', 'job-submit-tensor', field(40, 2, v(1, 10) + v(2, 2 << 32 | 10) + v(5, 1000) +
                                                    field(7, 2, step) + v(8, 1)))
    write('ctrl_decode', 'job-submit-bad-engine', field(40, 2, v(1, 11) + field(7, 2, step) + v(8, 9)))
    write('ctrl_decode', 'job-cancel', field(41, 2, v(1, 7)))
    write('ctrl_decode', 'collective-submit',
          field(42, 2, v(1, 9) + v(3, 1) + v(4, 1) + v(5, 2) + v(6, 0) + v(7, 0) + v(8, 1) +
                v(9, 0x44000000) + v(10, 0x44100000) + v(11, 4096)))
    write('ctrl_decode', 'link-retrain', field(60, 2, v(1, 0) + v(2, 1)))
    write('ctrl_decode', 'link-ber', field(60, 2, v(1, 0) + v(2, 4) + field(3, 1, struct.pack('<d', 1e-5))))
    write('ctrl_decode', 'link-ping', field(60, 2, v(1, 0) + v(2, 9) + v(7, 3)))
    write('ctrl_decode', 'link-no-port', field(60, 2, v(1, 15) + v(2, 1)))
    write('ctrl_decode', 'power-d3hot', field(80, 2, v(1, 2)))
    write('ctrl_decode', 'power-d0', field(80, 2, v(1, 0)))
    write('ctrl_decode', 'power-cap', field(81, 2, v(1, 8000)))
    write('ctrl_decode', 'power-pstate-limit', field(82, 2, v(1, 1)))
    write('ctrl_decode', 'power-autosuspend', field(83, 2, v(1, 100)))
    write('ctrl_decode', 'power-status', field(84, 2, b''))
    write('ctrl_decode', 'reliability-unknown-fault', field(100, 2, v(1, 9)))
    write('ctrl_decode', 'reliability-tensor-engine', field(100, 2, v(1, 4) + v(2, 1)))
    write('ctrl_decode', 'reliability-tensor-engine-beyond', field(100, 2, v(1, 4) + v(2, 99)))


def board_dtb():
    """Every board the project ships: the hand-written board/*.dts and the
    ones board/gen_board.py writes (ring, torus, switch, UltraServer), so
    the topology parser starts from links and switches of every shape."""
    import tempfile
    sys.path.insert(0, os.path.join(ROOT, 'board'))
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    import gen_board
    sources = {name[:-4]: os.path.join(ROOT, 'board', name)
               for name in os.listdir(os.path.join(ROOT, 'board')) if name.endswith('.dts')}
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in gen_board.BOARDS.items():
            sources[name] = os.path.join(tmp, name + '.dts')
            with open(sources[name], 'w') as f:
                f.write(build())
        for name in sorted(sources):
            out = os.path.join(HERE, 'corpus', 'board_dtb', 'seed-' + name + '.dtb')
            subprocess.run(['dtc', '-q', '-I', 'dts', '-O', 'dtb', '-o', out, sources[name]], check=True)


# job_file (job_file.cpp): the text of a `vtrn submit` job file.
def job_file():
    import json

    def job(name, doc):
        write('job_file', name, (doc if isinstance(doc, str) else json.dumps(doc)).encode())

    xy = [{"name": "x", "values": [1, 2.5, -3, 0]}, {"name": "y", "file": "y.bin"},
          {"name": "z", "bytes": 16, "output": "z.bin"}]
    job('add', {"name": "add", "chip": 0, "priority": 3, "timeout_ms": 10000, "max_cores": 2, "engine": "cores",
                "buffers": xy, "steps": [{"kernel": "add", "m": 2, "n": 2, "a": "x", "b": "y", "out": "z"}]})
    job('chain', {"buffers": [{"name": "x", "values": [1, 2, 3, 4, 5, 6]}, {"name": "y", "file": "y.bin"},
                              {"name": "s", "bytes": 24}, {"name": "g", "bytes": 24},
                              {"name": "r", "bytes": 8, "output": "r.bin"}],
                  "steps": [{"kernel": "mul", "m": 2, "n": 3, "a": "x", "b": "y", "out": "s"},
                            {"kernel": "gelu", "m": 2, "n": 3, "a": "s", "out": "g"},
                            {"kernel": "softmax", "m": 2, "n": 3, "a": "g", "out": "s"},
                            {"kernel": "sum", "m": 2, "n": 3, "a": "s", "out": "r"}]})
    for dtype, ab in (('fp32', 4), ('bf16', 2), ('fp8-e4m3', 1), ('fp8-e5m2', 1)):
        job('gemm-' + dtype, {"buffers": [{"name": "a", "file": "a.bin"}, {"name": "b", "bytes": 16 * 32 * ab},
                                          {"name": "c", "bytes": 16 * 16 * 4, "output": "c.bin"}],
                              "steps": [{"kernel": "gemm", "dtype": dtype, "m": 16, "n": 16, "k": 32,
                                         "a": "a", "b": "b", "out": "c"}]})
    job('gemm-mxfp4', {"buffers": [{"name": "a", "bytes": 256}, {"name": "as", "bytes": 16},
                                   {"name": "b", "bytes": 256}, {"name": "bs", "bytes": 16},
                                   {"name": "c", "bytes": 1024, "output": "c.bin"}],
                       "steps": [{"kernel": "gemm", "dtype": "mxfp4", "m": 16, "n": 16, "k": 32, "a": "a",
                                  "a_scales": "as", "b": "b", "b_scales": "bs", "out": "c"}]})
    job('values-special', {"buffers": [{"name": "v", "values": ["nan", "inf", "-inf", 1e-45, 3.4e38, -0.0],
                                        "bytes": 24}, {"name": "o", "bytes": 24}],
                           "steps": [{"kernel": "gelu", "dtype": "f32", "m": 1, "n": 6, "a": "v", "out": "o"}]})
    job('shape-mismatch', {"buffers": xy, "steps": [{"kernel": "add", "m": 2, "n": 3, "a": "x", "b": "y",
                                                     "out": "z"}]})
    job('limits', {"name": "n" * 64, "chip": 1 << 20, "priority": 7, "timeout_ms": 600000, "max_cores": 1024,
                   "buffers": [{"name": "x%d" % i, "bytes": 1 << 40} for i in range(32)],
                   "steps": [{"kernel": "gelu", "m": 65536, "n": 65536, "a": "x%d" % i, "out": "x%d" % (i + 1)}
                             for i in range(16)]})
    job('unknown-field', {"buffers": xy, "steps": [{"kernel": "add", "m": 2, "n": 2, "a": "x", "b": "y",
                                                    "out": "z", "colour": "red"}]})
    job('escaped-key', '{"buffers": [{"name": "x", "bytes": 4}], "col\\u006fur\\t": 1}')
    job('unknown-buffer', {"buffers": xy, "steps": [{"kernel": "add", "m": 2, "n": 2, "a": "x", "b": "w",
                                                     "out": "z"}]})
    job('out-is-input', {"buffers": xy, "steps": [{"kernel": "add", "m": 2, "n": 2, "a": "x", "b": "y",
                                                   "out": "x"}]})
    job('mxfp4-bad-k', {"buffers": xy, "steps": [{"kernel": "gemm", "dtype": "mxfp4", "m": 1, "n": 1, "k": 33,
                                                  "a": "x", "b": "y", "out": "z"}]})
    job('wrong-types', {"name": 7, "chip": -1, "priority": 1.5, "buffers": [{"name": "a/b~c", "bytes": "4"}],
                        "steps": {}})
    job('truncated', '{"buffers": [{"name": "x", "values": [1, 2')
    job('not-an-object', '[1, 2, 3]')
    job('empty', '')


if __name__ == '__main__':
    for build in (ctrl_ring, dma_queue, layout, log_reader, ctrl_decode, board_dtb, job_file):
        build()
    sys.exit(0)
