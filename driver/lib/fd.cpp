// RAII helpers for fds and mappings (see vtrn/drv/fd.h).
#include "vtrn/drv/fd.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <string>

namespace drv {

Error Mapping::map(int fd, size_t size) {
  reset();
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Error(Code::kSystem, std::string("mmap: ") + strerror(errno));
  base_ = static_cast<uint8_t*>(p);
  size_ = size;
  return Error();
}

void Mapping::reset() {
  if (base_ != nullptr) munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

Error set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return Error(Code::kSystem, "fcntl F_GETFL fd " + std::to_string(fd) + ": " + strerror(errno));
  if (fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return Error(Code::kSystem, "fcntl F_SETFL O_NONBLOCK fd " + std::to_string(fd) + ": " + strerror(errno));
  return Error();
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

int64_t monotonic_ms() { return int64_t(monotonic_ns() / 1000000u); }

}  // namespace drv
