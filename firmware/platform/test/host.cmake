# firmware/platform: /chosen/bootargs and the platform DTB scan, on QEMU's own
# virt tree (fixture compiled with dtc).
add_executable(fw_bootargs_test
  ${VTRN_ROOT}/firmware/platform/test/test_bootargs.cpp
  ${VTRN_ROOT}/firmware/platform/bootargs.cpp)
target_include_directories(fw_bootargs_test PRIVATE ${VTRN_ROOT}/firmware/platform/include)
target_link_libraries(fw_bootargs_test PRIVATE vtrn_common PkgConfig::CMOCKA)
add_test(NAME fw_bootargs COMMAND fw_bootargs_test)

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
target_link_libraries(fw_platform_scan_test PRIVATE vtrn_common vtrn_fdt PkgConfig::CMOCKA)
add_test(NAME fw_platform_scan COMMAND fw_platform_scan_test)
