# HBM allocator core (common/hbm): its CMocka tests and the native
# benchmark. Included from common/CMakeLists.txt; the allocator itself is part
# of vtrn_common (common/sources.cmake), which the firmware compiles too.

add_executable(hbm_alloc_test ${VTRN_ROOT}/common/hbm/test/hbm_alloc_test.cpp)
target_link_libraries(hbm_alloc_test PRIVATE vtrn_common PkgConfig::CMOCKA)
add_test(NAME hbm_alloc COMMAND hbm_alloc_test)

add_executable(hbm_stitch_test ${VTRN_ROOT}/common/hbm/test/hbm_stitch_test.cpp)
target_link_libraries(hbm_stitch_test PRIVATE vtrn_common PkgConfig::CMOCKA)
add_test(NAME hbm_stitch COMMAND hbm_stitch_test)

add_executable(hbm_trace_test ${VTRN_ROOT}/common/hbm/test/hbm_trace_test.cpp)
target_link_libraries(hbm_trace_test PRIVATE vtrn_common PkgConfig::CMOCKA)
add_test(NAME hbm_trace COMMAND hbm_trace_test)
set_tests_properties(hbm_trace PROPERTIES TIMEOUT 120)

# The benchmark is run by hand (no thresholds belong in ctest); it wants
# optimised code whatever the build type.
add_executable(hbm_bench ${VTRN_ROOT}/common/hbm/bench/hbm_bench.cpp)
target_link_libraries(hbm_bench PRIVATE vtrn_common)
target_compile_options(hbm_bench PRIVATE -O2)

# Which part of the fragmentation figure is placement policy and which is
# the trace: the churn under several lifetime models and policies.
add_executable(hbm_frag_policies ${VTRN_ROOT}/common/hbm/bench/hbm_frag_policies.cpp)
target_link_libraries(hbm_frag_policies PRIVATE vtrn_common)
target_compile_options(hbm_frag_policies PRIVATE -O2)
