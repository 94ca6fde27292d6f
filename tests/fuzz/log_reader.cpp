// Fuzzes the host's firmware-log reader (vtrn::hostif::LogReader) over a
// ring whose header and bytes the firmware controls.
//
// Input: one byte choosing the ring size (16 B..4 KiB, the power of two the
// host would have validated from the region table), then ops: read with a
// fuzzer-chosen buffer size, set/advance/rewind write_pos arbitrarily,
// scribble ring bytes, append like an honest writer, rewind_to_tail. The
// header and ring sit in one exact-size heap block and every output buffer
// is exact-size, so ASan flags any byte read or written outside them.
//
// Invariants after each read: no more than the buffer size is returned; the
// output is complete lines (ends in '\n') or one piece of a line too long for
// the buffer (no '\n' in it); the bytes are exactly the ring bytes just
// before the new cursor and were not yet overwritten (inside the last `size`
// bytes written); lost_bytes() never decreases.
#include <memory>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "vtrn/log_ring.h"

using namespace vtrn::hostif;

namespace {

constexpr uint32_t kMaxCap = 8192;
constexpr uint64_t kPlausibleWritePos = uint64_t(1) << 56;

void append(LogRingHeader* hdr, char* ring, uint64_t size, const uint8_t* text, size_t n) {
  for (size_t i = 0; i < n; ++i) ring[(hdr->write_pos + i) & (size - 1)] = char(text[i]);
  hdr->write_pos += n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vtrn::fuzz::Input in(data, size);
  const uint64_t ring_size = uint64_t(1) << (4 + in.u8() % 9);
  auto block = std::make_unique<uint8_t[]>(sizeof(LogRingHeader) + ring_size);
  auto* hdr = reinterpret_cast<LogRingHeader*>(block.get());
  char* ring = reinterpret_cast<char*>(hdr + 1);
  hdr->size = ring_size;
  LogReader reader(hdr, ring_size);
  bool plausible = true;  // every write_pos the reader saw was below kPlausibleWritePos

  for (int ops = 0; !in.empty() && ops < 256; ++ops) {
    switch (in.u8() % 9) {
      case 0: {
        const size_t cap = in.u16() % (kMaxCap + 1);
        auto out = std::make_unique<char[]>(cap);
        const uint64_t lost_before = reader.lost_bytes();
        const size_t n = reader.read(out.get(), cap);
        const uint64_t wp = hdr->write_pos;
        const uint64_t cur = reader.cursor();
        FUZZ_CHECK(n <= cap, "read %zu into %zu", n, cap);
        // The count is a statistic: write_pos values near 2^64 (centuries
        // of logging) can wrap it, which is not worth guarding against.
        plausible = plausible && hdr->write_pos < kPlausibleWritePos;
        FUZZ_CHECK(reader.lost_bytes() >= lost_before || !plausible,
                   "lost bytes went down from %llu to %llu", (unsigned long long)lost_before,
                   (unsigned long long)reader.lost_bytes());
        if (cap == 0) break;  // a zero-byte read does not look at the ring
        FUZZ_CHECK(cur <= wp, "cursor %llu past write_pos %llu", (unsigned long long)cur,
                   (unsigned long long)wp);
        if (n == 0) break;
        FUZZ_CHECK(out[n - 1] == '\n' || memchr(out.get(), '\n', n) == nullptr,
                   "output of %zu bytes holds a partial line after a complete one", n);
        const uint64_t first = cur - n;
        FUZZ_CHECK(cur >= n && wp - first <= ring_size,
                   "handed out bytes from %llu, already overwritten at write_pos %llu",
                   (unsigned long long)first, (unsigned long long)wp);
        for (size_t i = 0; i < n; ++i) {
          FUZZ_CHECK(out[i] == ring[(first + i) & (ring_size - 1)],
                     "byte %zu is not ring byte %llu", i, (unsigned long long)(first + i));
        }
        break;
      }
      case 1:
        hdr->write_pos = in.u64();
        break;
      case 2:
        hdr->write_pos += in.u16();
        break;
      case 3:
        hdr->write_pos -= in.u16();
        break;
      case 4: {
        const uint64_t off = in.u16() & (ring_size - 1);
        size_t len = in.u8();
        if (len > ring_size - off) len = size_t(ring_size - off);
        in.bytes(ring + off, len);
        break;
      }
      case 5: {
        uint8_t text[255];
        const size_t len = in.u8();
        in.bytes(text, len);
        append(hdr, ring, ring_size, text, len);
        break;
      }
      case 6:
        reader.rewind_to_tail(in.u64());
        FUZZ_CHECK(reader.cursor() <= hdr->write_pos, "rewound past write_pos");
        break;
      case 7: {
        // A whole line as the firmware writes one.
        uint8_t text[256];
        const size_t len = in.u8();
        in.bytes(text, len);
        for (size_t i = 0; i < len; ++i) {
          if (text[i] == '\n') text[i] = ' ';
        }
        text[len] = '\n';
        append(hdr, ring, ring_size, text, len + 1);
        break;
      }
      case 8:
        // The reader must use the size the host validated, not this field.
        hdr->size = in.u64();
        break;
    }
  }
  return 0;
}
