# firmware/ctrl: dispatch, the validator, the core handlers and the arena.
add_executable(fw_ctrl_dispatch_test ${VTRN_ROOT}/firmware/ctrl/test/test_ctrl_dispatch.cpp)
target_link_libraries(fw_ctrl_dispatch_test PRIVATE fw_service_host PkgConfig::CMOCKA)
add_test(NAME fw_ctrl_dispatch COMMAND fw_ctrl_dispatch_test)
