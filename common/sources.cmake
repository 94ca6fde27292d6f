# Portable code built twice: into host libraries (common/CMakeLists.txt) and
# into the firmware (firmware/CMakeLists.txt). Paths are absolute so either
# build can include this file.
set(VTRN_COMMON_INCLUDES
  ${VTRN_ROOT}/include
  ${VTRN_ROOT}/common/error/include
  ${VTRN_ROOT}/common/crc/include
  ${VTRN_ROOT}/common/hostif/include
  ${VTRN_ROOT}/common/board/include
  ${VTRN_ROOT}/common/dma/include
  ${VTRN_ROOT}/common/hbm/include)
set(VTRN_COMMON_SOURCES
  ${VTRN_ROOT}/common/error/error.cpp
  ${VTRN_ROOT}/common/crc/crc32.cpp
  ${VTRN_ROOT}/common/hostif/ctrl_ring.cpp
  ${VTRN_ROOT}/common/hostif/log_ring.cpp
  ${VTRN_ROOT}/common/hostif/layout.cpp
  ${VTRN_ROOT}/common/board/board.cpp
  ${VTRN_ROOT}/common/dma/dma_queue.cpp
  ${VTRN_ROOT}/common/dma/dma_host.cpp
  ${VTRN_ROOT}/common/hbm/hbm.cpp)

include(${VTRN_ROOT}/common/link/sources.cmake)
include(${VTRN_ROOT}/common/power/sources.cmake)
list(APPEND VTRN_COMMON_INCLUDES ${VTRN_LINK_INCLUDES} ${VTRN_POWER_INCLUDES})
list(REMOVE_DUPLICATES VTRN_COMMON_INCLUDES)
list(APPEND VTRN_COMMON_SOURCES ${VTRN_LINK_SOURCES} ${VTRN_POWER_SOURCES})
include(${VTRN_ROOT}/common/numerics/sources.cmake)
list(APPEND VTRN_COMMON_INCLUDES ${VTRN_NUMERICS_INCLUDES})
list(APPEND VTRN_COMMON_SOURCES ${VTRN_NUMERICS_SOURCES})
