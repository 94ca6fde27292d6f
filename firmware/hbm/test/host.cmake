# firmware/hbm: the HBM manager (owners, access check, ECC model, its routes
# through the dispatcher) over the allocator core from vtrn_common.
add_executable(fw_hbm_manager_test
  ${VTRN_ROOT}/firmware/hbm/test/test_hbm_manager.cpp
  ${VTRN_ROOT}/firmware/hbm/hbm_manager.cpp)
target_include_directories(fw_hbm_manager_test PRIVATE ${VTRN_ROOT}/firmware/hbm/include)
target_link_libraries(fw_hbm_manager_test PRIVATE fw_service_host PkgConfig::CMOCKA)
add_test(NAME fw_hbm_manager COMMAND fw_hbm_manager_test)
