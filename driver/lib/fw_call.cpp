// The non-template half of fw_call.h: finding the oneof members of a call
// through protobuf-c's descriptors and checking an answer against them.
#include "vtrn/drv/fw_call.h"

namespace drv::fw_detail {

const ProtobufCFieldDescriptor* request_field(const ProtobufCMessageDescriptor* d) {
  const ProtobufCMessageDescriptor& env = vtrn__ctrl__request__descriptor;
  for (unsigned i = 0; d != nullptr && i < env.n_fields; ++i) {
    if (env.fields[i].type == PROTOBUF_C_TYPE_MESSAGE && env.fields[i].descriptor == d) return &env.fields[i];
  }
  return nullptr;
}

const ProtobufCFieldDescriptor* response_field(const ProtobufCFieldDescriptor* in, size_t resp_bytes) {
  if (in == nullptr) return nullptr;
  const ProtobufCFieldDescriptor* f =
      protobuf_c_message_descriptor_get_field_by_name(&vtrn__ctrl__response__descriptor, in->name);
  if (f == nullptr || f->type != PROTOBUF_C_TYPE_MESSAGE ||
      static_cast<const ProtobufCMessageDescriptor*>(f->descriptor)->sizeof_message != resp_bytes)
    return nullptr;
  return f;
}

Result<const ProtobufCMessage*> answer_body(const CtrlResult& r, const ProtobufCFieldDescriptor* in,
                                            const ProtobufCFieldDescriptor* out, uint32_t chip) {
  if (!r.ok()) return r.error;
  if (out == nullptr)
    return Error(Code::kInternal, std::string("vtrnd: no answer of that type to control request ") +
                                      (in ? in->name : "(not a request)"));
  const Vtrn__Ctrl__Response* resp = r.response;
  const ProtobufCMessage* body = nullptr;
  if (resp != nullptr && uint32_t(resp->body_case) == out->id)
    body = *reinterpret_cast<ProtobufCMessage* const*>(reinterpret_cast<const uint8_t*>(resp) + out->offset);
  if (body != nullptr) return body;
  // The expected member with a null pointer is no body either.
  const ProtobufCFieldDescriptor* got =
      resp == nullptr || uint32_t(resp->body_case) == out->id
          ? nullptr
          : protobuf_c_message_descriptor_get_field(&vtrn__ctrl__response__descriptor, int(resp->body_case));
  return Error(Code::kChipError, "chip " + std::to_string(chip) + ": firmware answered " + in->name + " with " +
                                     (got ? got->name : "no body"));
}

}  // namespace drv::fw_detail
