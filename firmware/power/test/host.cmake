# firmware/power: board -> config, activity replay, D0/D3hot, throttling, cap,
# the power routes through the dispatcher and the pace delay, on a simulated
# clock.
add_executable(fw_power_service_test
  ${VTRN_ROOT}/firmware/power/test/test_power_service.cpp
  ${VTRN_ROOT}/firmware/power/power_controller.cpp)
target_include_directories(fw_power_service_test PRIVATE ${VTRN_ROOT}/firmware/power/include)
target_link_libraries(fw_power_service_test PRIVATE fw_service_host vtrn_fdt PkgConfig::CMOCKA)
add_test(NAME fw_power_service COMMAND fw_power_service_test)
