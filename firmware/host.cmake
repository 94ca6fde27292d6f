# Host-side unit tests of firmware logic that has no hardware in it. Included
# by the top-level CMakeLists.txt (include(${VTRN_ROOT}/firmware/host.cmake))
# after the vtrn_proto target exists; the sources are the
# same files the firmware image compiles for AArch64.
add_executable(fw_ctrl_dispatch_test
  ${VTRN_ROOT}/firmware/ctrl/test/test_ctrl_dispatch.cpp
  ${VTRN_ROOT}/firmware/ctrl/ctrl_dispatch.cpp
  ${VTRN_ROOT}/firmware/ctrl/pb_arena.cpp)
target_include_directories(fw_ctrl_dispatch_test PRIVATE ${VTRN_ROOT}/firmware/ctrl/include)
target_link_libraries(fw_ctrl_dispatch_test PRIVATE
  vtrn_proto PkgConfig::PROTOBUF_C PkgConfig::CMOCKA)
add_test(NAME fw_ctrl_dispatch COMMAND fw_ctrl_dispatch_test)

add_executable(fw_bootargs_test
  ${VTRN_ROOT}/firmware/platform/test/test_bootargs.cpp
  ${VTRN_ROOT}/firmware/platform/bootargs.cpp)
target_include_directories(fw_bootargs_test PRIVATE ${VTRN_ROOT}/firmware/platform/include)
target_link_libraries(fw_bootargs_test PRIVATE PkgConfig::CMOCKA)
add_test(NAME fw_bootargs COMMAND fw_bootargs_test)

# The platform DTB scan, on QEMU's own virt tree (fixture compiled with dtc).
set(_fw_virt_dtb ${CMAKE_CURRENT_BINARY_DIR}/firmware-test/qemu-virt.dtb)
add_custom_command(
  OUTPUT ${_fw_virt_dtb}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/firmware-test
  COMMAND ${DTC} -q -I dts -O dtb -o ${_fw_virt_dtb} ${VTRN_ROOT}/firmware/platform/test/qemu-virt.dts
  DEPENDS ${VTRN_ROOT}/firmware/platform/test/qemu-virt.dts
  COMMENT "dtc qemu-virt.dts (firmware platform test fixture)")
add_executable(fw_platform_scan_test
  ${VTRN_ROOT}/firmware/platform/test/test_platform_scan.cpp
  ${VTRN_ROOT}/firmware/platform/platform_scan.cpp
  ${VTRN_ROOT}/firmware/platform/bootargs.cpp
  ${_fw_virt_dtb})
target_include_directories(fw_platform_scan_test PRIVATE ${VTRN_ROOT}/firmware/platform/include)
target_compile_definitions(fw_platform_scan_test PRIVATE VTRN_QEMU_VIRT_DTB="${_fw_virt_dtb}")
target_link_libraries(fw_platform_scan_test PRIVATE vtrn_fdt PkgConfig::CMOCKA)
add_test(NAME fw_platform_scan COMMAND fw_platform_scan_test)

# firmware/dma: region setup, HBM range and the queue scheduler, over real
# vtrn::dma::Queue objects from vtrn_common.
add_executable(fw_dma_sched_test
  ${VTRN_ROOT}/firmware/dma/test/test_dma_sched.cpp
  ${VTRN_ROOT}/firmware/dma/dma_sched.cpp)
target_include_directories(fw_dma_sched_test PRIVATE ${VTRN_ROOT}/firmware/dma/include)
target_link_libraries(fw_dma_sched_test PRIVATE vtrn_common PkgConfig::CMOCKA)
add_test(NAME fw_dma_sched COMMAND fw_dma_sched_test)
