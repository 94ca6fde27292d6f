# firmware/collectives: the ring schedule, framing and reduction of one rank,
# several ranks joined by in-order frame queues.
add_executable(fw_collective_test
  ${VTRN_ROOT}/firmware/collectives/test/test_collective.cpp
  ${VTRN_ROOT}/firmware/collectives/collective.cpp)
target_include_directories(fw_collective_test PRIVATE ${VTRN_ROOT}/firmware/collectives/include)
target_link_libraries(fw_collective_test PRIVATE vtrn_common PkgConfig::CMOCKA)
add_test(NAME fw_collective COMMAND fw_collective_test)
