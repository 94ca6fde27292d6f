# protoc's Python output imports the .proto files it depends on as top-level
# modules; inside the vtrn.proto package they are siblings.
file(READ ${FILE} text)
string(REGEX REPLACE "\nimport (vtrn_[a-z_]+_pb2)" "\nfrom . import \\1" text "${text}")
file(WRITE ${FILE} "${text}")
