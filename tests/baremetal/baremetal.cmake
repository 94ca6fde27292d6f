# Bare-metal test images (tests/baremetal/CMakeLists.txt) as an external
# sub-build with the firmware toolchain, and the ctest cases that run them
# under qemu-system-aarch64. Included from the top-level CMakeLists.txt
# (after enable_testing()):
#
#   include(${VTRN_ROOT}/tests/baremetal/baremetal.cmake)
#
# Tests:
#   baremetal_copy_correctness  hal_copy_memcpy against a byte loop (about
#                               20 s under TCG); passes on "copy-check: PASS"
#   baremetal_copy_bench        label `bench`: picolibc memcpy vs
#                               hal_copy_memcpy GB/s, 64 B .. 16 MiB; asserts
#                               only that every figure was produced
# Both fail on any "FAIL" line (a mismatch, a wrong copy, or an exception:
# the images print the syndrome and power off instead of hanging). The
# images end QEMU themselves with PSCI SYSTEM_OFF; the ctest TIMEOUT is the
# backstop.
if(NOT VTRN_BUILD_FIRMWARE)
  if(VTRN_REQUIRE_ALL_TESTS)
    message(FATAL_ERROR "VTRN_REQUIRE_ALL_TESTS: VTRN_BUILD_FIRMWARE is OFF, so no bare-metal test would run")
  endif()
  return()
endif()

include(ExternalProject)
ExternalProject_Add(baremetal
  SOURCE_DIR ${VTRN_ROOT}/tests/baremetal
  BINARY_DIR ${CMAKE_BINARY_DIR}/baremetal
  CMAKE_ARGS
    -DCMAKE_TOOLCHAIN_FILE=${VTRN_ROOT}/cmake/aarch64-baremetal.cmake
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DVTRN_ROOT=${VTRN_ROOT}
    -G ${CMAKE_GENERATOR}
  BUILD_ALWAYS ON
  INSTALL_COMMAND ""
  USES_TERMINAL_BUILD ON)

find_program(VTRN_QEMU_SYSTEM_AARCH64 qemu-system-aarch64)
# The chip's CPU model (shared/decisions: -cpu cortex-a53); `max` can be
# compared by reconfiguring with -DVTRN_BAREMETAL_CPU=max.
set(VTRN_BAREMETAL_CPU "cortex-a53" CACHE STRING "QEMU -cpu for the bare-metal test images")
if(NOT VTRN_QEMU_SYSTEM_AARCH64)
  if(VTRN_REQUIRE_ALL_TESTS)
    message(FATAL_ERROR "VTRN_REQUIRE_ALL_TESTS: qemu-system-aarch64 not found, so no bare-metal test would "
                        "run (scripts/install-deps.sh installs it)")
  endif()
  message(STATUS "qemu-system-aarch64 not found: bare-metal tests not registered")
  return()
endif()

# 256 MiB of RAM: the images place their buffers at fixed addresses up to
# 0x4C000000 (tests/baremetal/bm.h). The console is the PL011 on stdio.
set(_bm_qemu ${VTRN_QEMU_SYSTEM_AARCH64} -M virt -cpu ${VTRN_BAREMETAL_CPU} -m 256M
    -nographic -nodefaults -serial stdio)

add_test(NAME baremetal_copy_correctness
  COMMAND ${_bm_qemu} -kernel ${CMAKE_BINARY_DIR}/baremetal/copy_check.elf)
set_tests_properties(baremetal_copy_correctness PROPERTIES
  PASS_REGULAR_EXPRESSION "copy-check: PASS"
  FAIL_REGULAR_EXPRESSION "FAIL"
  LABELS baremetal
  TIMEOUT 300
  # One vCPU spinning for ~20 s: keep it off the integration tests' cores.
  RESOURCE_LOCK vtrn_qemu)

add_test(NAME baremetal_copy_bench
  COMMAND ${_bm_qemu} -kernel ${CMAKE_BINARY_DIR}/baremetal/copy_bench.elf)
set_tests_properties(baremetal_copy_bench PROPERTIES
  PASS_REGULAR_EXPRESSION "copy-bench: done cases=10"
  FAIL_REGULAR_EXPRESSION "FAIL"
  LABELS bench
  TIMEOUT 180
  RESOURCE_LOCK vtrn_qemu)
