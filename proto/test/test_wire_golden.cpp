// Wire-compatibility golden test of both protocols (vtrn.api between
// clients and vtrnd, vtrn.ctrl between vtrnd and the firmware): for every
// kind of Request, Response and Event, a message with every field set to a
// value derived from its field number (enums to their largest value, one
// element per repeated field, sub-messages three deep, the first member of
// each inner oneof) is packed, and its size and CRC-32 must match the table
// below. Moving an enum or message to another .proto file, renaming it or
// sharing it between the protocols leaves the bytes alone; changing a field
// number, a field's type or an enum value does not, and fails here naming
// the message. The table is what the protocols were when it was written: a
// deliberate change of the wire updates the row (the failure prints it).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "vtrn/crc32.h"
#include "vtrn_api.pb-c.h"
#include "vtrn_ctrl.pb-c.h"

namespace {

struct Golden {
  const char* name;
  size_t bytes;
  uint32_t crc;
};

#include "wire_golden.inc"

// Owns every allocation of the messages being built.
struct Pool {
  std::vector<std::unique_ptr<uint8_t[]>> blocks;
  void* get(size_t n) {
    blocks.push_back(std::make_unique<uint8_t[]>(n));
    memset(blocks.back().get(), 0, n);
    return blocks.back().get();
  }
};

void fill(Pool& pool, ProtobufCMessage* m, int depth);

// One value of a singular field (or one element of a repeated one) at `at`.
void set_value(Pool& pool, const ProtobufCFieldDescriptor& f, void* at, int depth) {
  const uint64_t v = uint64_t(f.id) * 7 + uint64_t(depth);
  switch (f.type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: *static_cast<int32_t*>(at) = -int32_t(v); break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: *static_cast<uint32_t*>(at) = uint32_t(v); break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: *static_cast<int64_t*>(at) = -int64_t(v << 33); break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: *static_cast<uint64_t*>(at) = v << 33; break;
    case PROTOBUF_C_TYPE_FLOAT: *static_cast<float*>(at) = float(v) + 0.5f; break;
    case PROTOBUF_C_TYPE_DOUBLE: *static_cast<double*>(at) = double(v) + 0.25; break;
    case PROTOBUF_C_TYPE_BOOL: *static_cast<protobuf_c_boolean*>(at) = 1; break;
    case PROTOBUF_C_TYPE_ENUM: {
      const auto* e = static_cast<const ProtobufCEnumDescriptor*>(f.descriptor);
      int best = 0;
      for (unsigned i = 0; i < e->n_values; ++i) best = e->values[i].value > best ? e->values[i].value : best;
      *static_cast<int*>(at) = best;
      break;
    }
    case PROTOBUF_C_TYPE_STRING: {
      const std::string s = "s" + std::to_string(v);
      char* p = static_cast<char*>(pool.get(s.size() + 1));
      memcpy(p, s.c_str(), s.size() + 1);
      *static_cast<char**>(at) = p;
      break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
      auto* b = static_cast<ProtobufCBinaryData*>(at);
      b->len = 3;
      b->data = static_cast<uint8_t*>(pool.get(3));
      b->data[0] = uint8_t(v);
      b->data[1] = 0;
      b->data[2] = 0xff;
      break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
      const auto* d = static_cast<const ProtobufCMessageDescriptor*>(f.descriptor);
      auto* sub = static_cast<ProtobufCMessage*>(pool.get(d->sizeof_message));
      d->message_init(sub);
      if (depth < 3) fill(pool, sub, depth + 1);
      *static_cast<ProtobufCMessage**>(at) = sub;
      break;
    }
  }
}

size_t value_size(const ProtobufCFieldDescriptor& f) {
  switch (f.type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return 8;
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char*);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage*);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM: return sizeof(int);
    default: return 4;
  }
}

void fill(Pool& pool, ProtobufCMessage* m, int depth) {
  const ProtobufCMessageDescriptor* d = m->descriptor;
  auto* base = reinterpret_cast<uint8_t*>(m);
  std::set<unsigned> oneofs_set;
  for (unsigned i = 0; i < d->n_fields; ++i) {
    const ProtobufCFieldDescriptor& f = d->fields[i];
    if (f.flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      if (!oneofs_set.insert(f.quantifier_offset).second) continue;
      *reinterpret_cast<uint32_t*>(base + f.quantifier_offset) = f.id;
      set_value(pool, f, base + f.offset, depth);
    } else if (f.label == PROTOBUF_C_LABEL_REPEATED) {
      void* elems = pool.get(value_size(f));
      set_value(pool, f, elems, depth);
      *reinterpret_cast<size_t*>(base + f.quantifier_offset) = 1;
      *reinterpret_cast<void**>(base + f.offset) = elems;
    } else {
      if (f.label == PROTOBUF_C_LABEL_OPTIONAL && f.quantifier_offset != 0 && f.type != PROTOBUF_C_TYPE_MESSAGE &&
          f.type != PROTOBUF_C_TYPE_STRING)
        *reinterpret_cast<protobuf_c_boolean*>(base + f.quantifier_offset) = 1;
      set_value(pool, f, base + f.offset, depth);
    }
  }
}

struct Packed {
  std::string name;
  size_t bytes;
  uint32_t crc;
};

// One message per member of the top-level oneof of `top` (Request,
// Response, Event), each with only that member set, plus the top's own
// fields.
std::vector<Packed> pack_each_kind(const char* proto, const ProtobufCMessageDescriptor& top) {
  std::vector<Packed> out;
  for (unsigned i = 0; i < top.n_fields; ++i) {
    const ProtobufCFieldDescriptor& member = top.fields[i];
    if (!(member.flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) continue;
    Pool pool;
    auto* m = static_cast<ProtobufCMessage*>(pool.get(top.sizeof_message));
    top.message_init(m);
    auto* base = reinterpret_cast<uint8_t*>(m);
    for (unsigned j = 0; j < top.n_fields; ++j) {
      const ProtobufCFieldDescriptor& f = top.fields[j];
      if (f.flags & PROTOBUF_C_FIELD_FLAG_ONEOF) continue;
      if (f.label == PROTOBUF_C_LABEL_REPEATED) continue;
      set_value(pool, f, base + f.offset, 0);
    }
    *reinterpret_cast<uint32_t*>(base + member.quantifier_offset) = member.id;
    set_value(pool, member, base + member.offset, 0);
    std::vector<uint8_t> buf(protobuf_c_message_get_packed_size(m));
    protobuf_c_message_pack(m, buf.data());
    out.push_back({std::string(proto) + "." + top.short_name + "." + member.name, buf.size(),
                   vtrn::crc32(buf.data(), buf.size())});
  }
  return out;
}

std::vector<Packed> pack_all() {
  std::vector<Packed> all;
  for (auto [proto, d] : {std::pair{"api", &vtrn__api__request__descriptor},
                          std::pair{"api", &vtrn__api__response__descriptor},
                          std::pair{"ctrl", &vtrn__ctrl__request__descriptor},
                          std::pair{"ctrl", &vtrn__ctrl__response__descriptor},
                          std::pair{"ctrl", &vtrn__ctrl__event__descriptor}}) {
    for (Packed& p : pack_each_kind(proto, *d)) all.push_back(std::move(p));
  }
  return all;
}

void test_every_message_kind_packs_to_its_golden_bytes(void**) {
  const std::vector<Packed> now = pack_all();
  size_t bad = 0;
  for (const Packed& p : now) {
    const Golden* g = nullptr;
    for (const Golden& x : kGolden) {
      if (p.name == x.name) g = &x;
    }
    if (g == nullptr || g->bytes != p.bytes || g->crc != p.crc) {
      ++bad;
      fprintf(stderr, "%s: {\"%s\", %zu, 0x%08xu},\n", g ? "changed" : "new", p.name.c_str(), p.bytes, p.crc);
    }
  }
  for (const Golden& x : kGolden) {
    bool found = false;
    for (const Packed& p : now) found = found || p.name == x.name;
    if (!found) {
      ++bad;
      fprintf(stderr, "gone: %s\n", x.name);
    }
  }
  assert_int_equal(bad, 0);
  assert_int_equal(now.size(), sizeof kGolden / sizeof kGolden[0]);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_message_kind_packs_to_its_golden_bytes),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
