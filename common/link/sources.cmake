# The link layer's portable sources and include directories, for both
# builds: link.cmake (host library, tests, benchmark) and the firmware, which
# includes this file and compiles VTRN_LINK_SOURCES with its own flags.
# common/crc/crc32.cpp, which the link needs, is already in the common sources.
set(VTRN_LINK_SOURCES
  ${VTRN_ROOT}/common/link/link_transport.cpp
  ${VTRN_ROOT}/common/link/link_port.cpp)
set(VTRN_LINK_INCLUDES
  ${VTRN_ROOT}/common/link/include
  ${VTRN_ROOT}/include
  ${VTRN_ROOT}/common/crc/include)
