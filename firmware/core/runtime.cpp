// C runtime glue for picolibc and Debian's arm64 libfdt.a / libprotobuf-c.a,
// which were built for glibc: they expect __stack_chk_guard and
// __stack_chk_fail (picolibc's would pull in raise/getpid/kill),
// __assert_fail, and an _exit. All fatal paths end in fw::panic.
//
// There is no heap: malloc/calloc/realloc panic, because protobuf-c must
// only ever allocate from the per-message arena (fw/pb_arena.h); reaching
// the system allocator means a caller forgot to pass it. free(NULL) is
// allowed, as C requires.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fw/panic.h"

using vtrn::hostif::kPanicAssert;
using vtrn::hostif::kPanicStack;

extern "C" {

// Set by boot/start.S from the generic counter before the first C call.
uintptr_t __stack_chk_guard;

[[noreturn]] void __stack_chk_fail(void) {
  fw::panic(kPanicStack, "stack protector: canary overwritten (caller 0x%llx)",
            (unsigned long long)(uintptr_t)__builtin_return_address(0));
}

// glibc's name (used by Debian's libprotobuf-c.a).
[[noreturn]] void __assert_fail(const char* expr, const char* file, unsigned int line,
                                const char* func) {
  fw::panic(kPanicAssert, "assert %s failed at %s:%u (%s)", expr, file, line,
            func ? func : "?");
}

// picolibc's name (used by assert() in our own code and picolibc).
[[noreturn]] void __assert_func(const char* file, int line, const char* func, const char* expr) {
  fw::panic(kPanicAssert, "assert %s failed at %s:%d (%s)", expr, file, line, func ? func : "?");
}

[[noreturn]] void _exit(int status) {
  fw::panic(kPanicAssert, "_exit(%d) called", status);
}

[[noreturn]] void abort(void) { fw::panic(kPanicAssert, "abort() called"); }

void* malloc(size_t n) {
  fw::panic(kPanicAssert, "malloc(%zu) called: the firmware has no heap", n);
}

void* calloc(size_t n, size_t m) {
  fw::panic(kPanicAssert, "calloc(%zu, %zu) called: the firmware has no heap", n, m);
}

void* realloc(void* p, size_t n) {
  fw::panic(kPanicAssert, "realloc(%zu) called: the firmware has no heap", n);
}

void free(void* p) {
  if (p) fw::panic(kPanicAssert, "free(%p) called: the firmware has no heap", p);
}

[[noreturn]] void __cxa_pure_virtual(void) { fw::panic(kPanicAssert, "pure virtual call"); }

}  // extern "C"
