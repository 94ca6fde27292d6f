// hal::fake: the fake-register backend of hal/mmio.h, for host unit tests.
//
// A test points a driver at ordinary host memory (usually a register-block
// struct on the stack), runs it, then asserts on that memory and on the
// ordered access log kept here. Where a device reacts to an access (a status
// flag that clears, read-to-acknowledge IAR, BAR sizing, write-1-to-set
// enables) the test installs a hook on the address range.
//
// Regions: a hook region covers [base, base+size). Accesses outside every
// region go straight to RAM. Inside a region:
//  - a read first loads the RAM value (or all-ones if the region is not
//    `backed`), then calls the read hook, which may replace the value;
//  - a write calls the write hook; if it returns false (or there is no write
//    hook) and the region is backed, the value is stored to RAM.
// An unbacked region never dereferences its addresses, so a test can model a
// 256 MiB ECAM window at an address range it does not own.
//
// Host only (std::function, std::vector). Not thread safe: tests are single
// threaded. reset() in every test's setup.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <vector>

namespace hal::fake {

struct Access {
  uintptr_t addr;
  uint8_t width;   // bytes: 1, 2, 4 or 8
  bool is_write;
  uint64_t value;  // value written, or value returned to the driver
};

using ReadHook = std::function<void(uintptr_t addr, unsigned width, uint64_t& value)>;
using WriteHook = std::function<bool(uintptr_t addr, unsigned width, uint64_t value)>;

// Forgets every region, the access log and the barrier counter.
void reset();

// Installs a hook region; later regions win where they overlap earlier ones.
void add_region(uintptr_t base, size_t size, ReadHook on_read, WriteHook on_write,
                bool backed = true);

// Every access in program order (reads and writes). Barriers are not logged
// as accesses; barrier_count() counts them.
const std::vector<Access>& log();
void clear_log();
// Accesses to exactly `addr` (any width), in order.
std::vector<Access> accesses_to(uintptr_t addr);
// Writes only, in order.
std::vector<Access> writes();
size_t barrier_count();

// Convenience for struct-shaped tests: address of a field as logged.
template <typename T>
inline uintptr_t addr_of(const volatile T* p) {
  return reinterpret_cast<uintptr_t>(p);
}

}  // namespace hal::fake
