// RAII owners for the kernel objects vtrnd juggles: file descriptors and
// shared mappings. Every fd vtrnd opens lives in a UniqueFd, so an error path
// that returns early cannot leak an eventfd, memfd or socket into a QEMU
// child or keep a chip's BAR2 alive after the chip is gone.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <utility>

#include "vtrn/drv/error.h"

namespace drv {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// A MAP_SHARED mapping, unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  ~Mapping() { reset(); }
  Mapping(Mapping&& o) noexcept
      : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      reset();
      base_ = std::exchange(o.base_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  // Maps `size` bytes of `fd` read-write shared; kSystem "mmap: <strerror>"
  // on failure (the mapping is then empty).
  Error map(int fd, size_t size);
  void reset();
  [[nodiscard]] uint8_t* data() const { return base_; }
  [[nodiscard]] size_t size() const { return size_; }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
};

// Sets O_NONBLOCK; kSystem naming the fcntl call, the fd and strerror on
// failure.
Error set_nonblocking(int fd);

// CLOCK_MONOTONIC in nanoseconds / milliseconds.
uint64_t monotonic_ns();
int64_t monotonic_ms();

// One step of a bounded spin-wait (pause / yield).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace drv
