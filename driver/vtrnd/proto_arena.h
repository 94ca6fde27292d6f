// ProtoArena: owns everything a protobuf-c message under construction points
// at (strings, sub-messages, pointer arrays) until it has been packed.
// protobuf-c messages hold raw pointers, so a reply built from temporaries
// needs one owner that outlives packing; each vtrnd service builds its
// replies with one of these on the stack. Not a general allocator.
#pragma once

#include <stddef.h>

#include <memory>
#include <string>
#include <vector>

namespace drv {

class ProtoArena {
 public:
  char* str(const std::string& s) {
    strs_.push_back(std::make_unique<std::string>(s));
    return strs_.back()->data();
  }
  template <typename T>
  T* make(const T& init) {
    auto p = std::make_shared<T>(init);
    keep_.push_back(p);
    return p.get();
  }
  // Takes over a message built elsewhere (and what it owns).
  template <typename T>
  T* own(std::unique_ptr<T> p) {
    std::shared_ptr<T> s(std::move(p));
    keep_.push_back(s);
    return s.get();
  }
  // An array of n pointers (one slot when n is 0, so it is never null).
  template <typename T>
  T** ptrs(size_t n) {
    auto v = std::make_shared<std::vector<T*>>(n == 0 ? 1 : n);
    keep_.push_back(v);
    return v->data();
  }
  char** strv(const std::vector<std::string>& v) {
    char** out = ptrs<char>(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = str(v[i]);
    return out;
  }

 private:
  std::vector<std::unique_ptr<std::string>> strs_;
  std::vector<std::shared_ptr<void>> keep_;
};

}  // namespace drv
