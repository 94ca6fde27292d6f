# firmware/platform: /chosen/bootargs and the platform DTB scan, on QEMU's own
# virt tree (fixture compiled with dtc).
fw_host_test(bootargs platform SOURCES bootargs.cpp LIBS vtrn_common)

set(_fw_virt_dtb ${CMAKE_CURRENT_BINARY_DIR}/firmware-test/qemu-virt.dtb)
add_custom_command(
  OUTPUT ${_fw_virt_dtb}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/firmware-test
  COMMAND ${DTC} -q -I dts -O dtb -o ${_fw_virt_dtb} ${VTRN_ROOT}/firmware/platform/test/qemu-virt.dts
  DEPENDS ${VTRN_ROOT}/firmware/platform/test/qemu-virt.dts
  COMMENT "dtc qemu-virt.dts (firmware platform test fixture)")
fw_host_test(platform_scan platform SOURCES platform_scan.cpp bootargs.cpp
  LIBS vtrn_common vtrn_fdt)
target_sources(fw_platform_scan_test PRIVATE ${_fw_virt_dtb})
target_compile_definitions(fw_platform_scan_test PRIVATE VTRN_QEMU_VIRT_DTB="${_fw_virt_dtb}")
