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

# firmware/dma: region setup, HBM range and the queue scheduler, over real
# vtrn::dma::Queue objects from vtrn_common.
add_executable(fw_dma_sched_test
  ${VTRN_ROOT}/firmware/dma/test/test_dma_sched.cpp
  ${VTRN_ROOT}/firmware/dma/dma_sched.cpp)
target_include_directories(fw_dma_sched_test PRIVATE ${VTRN_ROOT}/firmware/dma/include)
target_link_libraries(fw_dma_sched_test PRIVATE vtrn_common PkgConfig::CMOCKA)
add_test(NAME fw_dma_sched COMMAND fw_dma_sched_test)
