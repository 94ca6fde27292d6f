# firmware/dma: region setup, HBM range and the queue scheduler, over real
# vtrn::dma::Queue objects from vtrn_common.
add_executable(fw_dma_sched_test
  ${VTRN_ROOT}/firmware/dma/test/test_dma_sched.cpp
  ${VTRN_ROOT}/firmware/dma/dma_sched.cpp)
target_include_directories(fw_dma_sched_test PRIVATE ${VTRN_ROOT}/firmware/dma/include)
target_link_libraries(fw_dma_sched_test PRIVATE vtrn_common PkgConfig::CMOCKA)
add_test(NAME fw_dma_sched COMMAND fw_dma_sched_test)
