// The parts of the service contract (fw/service.h) that are code: route
// lookup and the response arena behind Call. Portable, like the contract.
#include "fw/service.h"

#include <string.h>

namespace fw {

const Route* Service::find(uint32_t request_case) const {
  for (const Route& r : routes()) {
    if (r.request_case == request_case) return &r;
  }
  return nullptr;
}

void* Call::alloc(size_t bytes) {
  ProtobufCAllocator* a = arena_.allocator();
  return a->alloc(a->allocator_data, bytes);
}

void* Call::alloc_zeroed(size_t bytes) {
  void* p = alloc(bytes);
  if (p != nullptr) memset(p, 0, bytes);
  return p;
}

vtrn::Error Call::no_memory(const char* what) const {
  return vtrn::Error(vtrn::Code::kInternal, "%s: the response arena cannot hold the %s body",
                     service_.name(), what);
}

}  // namespace fw
