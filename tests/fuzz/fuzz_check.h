// The harnesses' invariant check: prints what broke and aborts, so libFuzzer
// records the input as a crash exactly as it would a sanitizer report.
//
// It is not assert(): the harnesses are built without NDEBUG games, and a
// violated invariant must stop the fuzzer in every build type.
#pragma once

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond, ...)                                                   \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                             \
      fputc('\n', stderr);                                                      \
      abort();                                                                  \
    }                                                                           \
  } while (0)
