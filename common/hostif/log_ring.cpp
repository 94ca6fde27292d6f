// Log ring writer and reader. The writer never waits for readers; a reader
// detects that it was overrun by comparing its cursor with write_pos both
// before and after copying, because the bytes it copied may have been
// overwritten while it copied them.
#include "vtrn/log_ring.h"

#include <string.h>

namespace vtrn::hostif {

LogWriter::LogWriter(LogRingHeader* hdr, uint64_t data_size)
    : hdr_(hdr), data_(reinterpret_cast<char*>(hdr + 1)), size_(data_size) {
  pos_ = 0;
  hdr_->size = data_size;
  hdr_->dropped = 0;
  __atomic_store_n(&hdr_->write_pos, uint64_t(0), __ATOMIC_RELEASE);
}

void LogWriter::write(const char* text, size_t length) {
  if (!hdr_ || length == 0) return;
  if (length > size_ / 2) {
    // A line this long would evict most of the ring in one go.
    __atomic_store_n(&hdr_->dropped, hdr_->dropped + 1, __ATOMIC_RELAXED);
    return;
  }
  const uint64_t off = pos_ & (size_ - 1);
  const size_t first = size_t(size_ - off) < length ? size_t(size_ - off) : length;
  memcpy(data_ + off, text, first);
  if (first < length) memcpy(data_, text + first, length - first);
  pos_ += length;
  // Release: the bytes are visible before the position that covers them.
  __atomic_store_n(&hdr_->write_pos, pos_, __ATOMIC_RELEASE);
}

LogReader::LogReader(const LogRingHeader* hdr, uint64_t data_size)
    : hdr_(hdr), data_(reinterpret_cast<const char*>(hdr + 1)), size_(data_size) {}

void LogReader::rewind_to_tail(uint64_t bytes) {
  const uint64_t wp = __atomic_load_n(&hdr_->write_pos, __ATOMIC_ACQUIRE);
  const uint64_t keep = bytes < size_ ? bytes : size_;
  cursor_ = wp > keep ? wp - keep : 0;
  // Starting mid-ring lands mid-line: drop up to the next line start.
  resync_ = cursor_ != 0;
}

size_t LogReader::read(char* out, size_t cap) {
  if (!hdr_ || cap == 0) return 0;
  const uint64_t wp = __atomic_load_n(&hdr_->write_pos, __ATOMIC_ACQUIRE);
  if (wp < cursor_) {
    // The writer restarted (chip reboot): follow it from its new beginning.
    cursor_ = 0;
    resync_ = false;
  }
  if (wp - cursor_ > size_) {
    lost_ += wp - size_ - cursor_;
    cursor_ = wp - size_;
    resync_ = true;
  }
  uint64_t avail = wp - cursor_;
  if (avail > cap) avail = cap;
  const uint64_t off = cursor_ & (size_ - 1);
  const size_t first = size_t(size_ - off) < avail ? size_t(size_ - off) : size_t(avail);
  memcpy(out, data_ + off, first);
  if (first < avail) memcpy(out + first, data_, size_t(avail - first));

  // Anything the writer lapped while we copied is garbage.
  const uint64_t wp2 = __atomic_load_n(&hdr_->write_pos, __ATOMIC_ACQUIRE);
  uint64_t start = cursor_;
  uint64_t end = cursor_ + avail;
  if (wp2 > size_ && wp2 - size_ > start) {
    uint64_t bad_until = wp2 - size_;
    if (bad_until > end) bad_until = end;
    lost_ += bad_until - start;
    start = bad_until;
    resync_ = true;
  }
  size_t skip = size_t(start - cursor_);
  if (resync_) {
    while (start < end && out[skip] != '\n') {
      ++start;
      ++skip;
    }
    if (start == end) {
      cursor_ = end;
      return 0;
    }
    ++start;  // past the '\n'
    ++skip;
    resync_ = false;
  }
  // Hand out complete lines only; keep a partial tail for the next call.
  uint64_t last_nl = end;
  while (last_nl > start && out[last_nl - 1 - cursor_] != '\n') --last_nl;
  // A line longer than the caller's buffer is handed out in pieces rather
  // than stalling the reader forever.
  if (last_nl == start && end - cursor_ == cap) last_nl = end;
  const size_t n = size_t(last_nl - start);
  if (skip) memmove(out, out + skip, n);
  cursor_ = last_nl > start ? last_nl : start;
  return n;
}

}  // namespace vtrn::hostif
