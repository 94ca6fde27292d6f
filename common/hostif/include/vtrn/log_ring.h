// The firmware log ring (see LogRingHeader in include/vtrn/hostif.h): a byte
// ring of text lines with a single writer (firmware) and any number of
// readers that keep their own cursor. Readers never block the writer; an
// overrun reader loses the oldest lines and is told how many bytes it lost.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/hostif.h"

namespace vtrn::hostif {

class LogWriter {
 public:
  LogWriter() = default;
  // `hdr` is followed by `data_size` bytes of ring (power of two).
  LogWriter(LogRingHeader* hdr, uint64_t data_size);
  // Appends bytes (normally one complete line ending in '\n').
  void write(const char* text, size_t length);
  [[nodiscard]] uint64_t position() const { return pos_; }

 private:
  LogRingHeader* hdr_ = nullptr;
  char* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
};

class LogReader {
 public:
  LogReader() = default;
  // `size` is the ring size the host validated from the region table.
  LogReader(const LogRingHeader* hdr, uint64_t data_size);
  // Copies up to `cap` bytes of complete lines that are new since the last
  // call into `out`; returns bytes copied. Lost bytes (overrun or torn while
  // copying) are added to lost_bytes() and the reader resyncs at a line start.
  size_t read(char* out, size_t cap);
  // Positions the cursor so the next read returns at most the last `bytes`.
  void rewind_to_tail(uint64_t bytes);
  [[nodiscard]] uint64_t lost_bytes() const { return lost_; }
  [[nodiscard]] uint64_t cursor() const { return cursor_; }
  [[nodiscard]] uint64_t size() const { return size_; }  // the ring's data bytes

 private:
  const LogRingHeader* hdr_ = nullptr;
  const char* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t cursor_ = 0;
  uint64_t lost_ = 0;
  bool resync_ = false;
};

}  // namespace vtrn::hostif
