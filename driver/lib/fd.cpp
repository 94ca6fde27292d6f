// RAII helpers for fds and mappings (see vtrn/drv/fd.h).
#include "vtrn/drv/fd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>

namespace drv {

int Mapping::map(int fd, size_t size) {
  reset();
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return -errno;
  base_ = static_cast<uint8_t*>(p);
  size_ = size;
  return 0;
}

void Mapping::reset() {
  if (base_ != nullptr) munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

int set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return -errno;
  return 0;
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

int64_t monotonic_ms() { return int64_t(monotonic_ns() / 1000000u); }

}  // namespace drv
