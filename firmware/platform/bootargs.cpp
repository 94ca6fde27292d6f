// Boot-argument parsing for /chosen/bootargs (fw/platform.h). Kept apart
// from platform.cpp because it is portable (no libfdt, no panic): the host
// unit test builds this file as is. Values accept C prefixes (0x..., decimal)
// as strtoull does; unknown words are ignored so QEMU or a user may add their
// own arguments.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw/platform.h"

namespace fw::platform {

vtrn::Error parse_bootargs(const char* args, uint32_t* chip_id, uint64_t* board_address,
                           uint64_t* board_size) {
  using vtrn::Code;
  using vtrn::Error;
  bool have_chip = false, have_addr = false, have_size = false;
  const char* s = args;
  while (*s) {
    while (*s == ' ' || *s == '\t') ++s;
    if (!*s) break;
    const char* word = s;
    while (*s && *s != ' ' && *s != '\t') ++s;
    const size_t wlen = size_t(s - word);
    const char* eq = static_cast<const char*>(memchr(word, '=', wlen));
    if (!eq) continue;
    const size_t klen = size_t(eq - word);
    char value[32];
    const size_t vlen = wlen - klen - 1;
    if (vlen == 0 || vlen >= sizeof value) {
      if (klen > 5 && strncmp(word, "vtrn.", 5) == 0) {
        return Error(Code::kInvalidArgument, "bootargs: %.*s: empty or too long value", int(klen), word);
      }
      continue;
    }
    memcpy(value, eq + 1, vlen);
    value[vlen] = '\0';
    char* end = nullptr;
    const unsigned long long v = strtoull(value, &end, 0);
    const bool numeric = end && *end == '\0' && value[0] != '-';
    auto key_is = [&](const char* k) { return strlen(k) == klen && strncmp(word, k, klen) == 0; };
    if (key_is("vtrn.chip") || key_is("vtrn.board") || key_is("vtrn.board_size")) {
      if (!numeric) {
        return Error(Code::kInvalidArgument, "bootargs: %.*s=%s: not a number", int(klen), word, value);
      }
      if (key_is("vtrn.chip")) {
        if (v > 0xffffffffull) {
          return Error(Code::kInvalidArgument, "bootargs: vtrn.chip=%s: out of range", value);
        }
        *chip_id = uint32_t(v);
        have_chip = true;
      } else if (key_is("vtrn.board")) {
        *board_address = v;
        have_addr = true;
      } else {
        *board_size = v;
        have_size = true;
      }
    }
  }
  const char* missing = !have_chip ? "vtrn.chip" : !have_addr ? "vtrn.board"
                        : !have_size ? "vtrn.board_size" : nullptr;
  if (missing) return Error(Code::kInvalidArgument, "bootargs: %s: missing", missing);
  return Error();
}

bool bootarg_is(const char* args, const char* key, const char* value) {
  const size_t klen = strlen(key), vlen = strlen(value);
  const char* s = args;
  while (*s) {
    while (*s == ' ' || *s == '\t') ++s;
    const char* word = s;
    while (*s && *s != ' ' && *s != '\t') ++s;
    const size_t wlen = size_t(s - word);
    if (wlen == klen + 1 + vlen && strncmp(word, key, klen) == 0 && word[klen] == '=' &&
        strncmp(word + klen + 1, value, vlen) == 0)
      return true;
  }
  return false;
}

}  // namespace fw::platform
