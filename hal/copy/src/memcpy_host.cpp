// Host backend of hal_copy_memcpy: the C library's memcpy. The AArch64
// routine (memcpy_aarch64.S) cannot run on the x86 build host; this lets
// CpuEngine and everything above it run in host unit tests unchanged. The
// assembly itself is verified under QEMU by tests/baremetal.
#include <string.h>

#include "hal/copy.h"

#if defined(__aarch64__) && defined(VTRN_FIRMWARE)
#error "memcpy_host.cpp is the host backend; the firmware links memcpy_aarch64.S"
#endif

extern "C" void* hal_copy_memcpy(void* dst, const void* src, size_t length) {
  return memcpy(dst, src, length);
}
