# Number formats and kernels on the host: the host-only GEMM reference
# (added to vtrn_common, which already compiles the portable sources from
# common/numerics/sources.cmake) and the CMocka tests. Included from
# common/CMakeLists.txt.
target_sources(vtrn_common PRIVATE ${VTRN_NUMERICS_HOST_SOURCES})

add_executable(numerics_formats_test ${VTRN_ROOT}/common/numerics/test/test_numerics.cpp)
target_link_libraries(numerics_formats_test PRIVATE vtrn_common PkgConfig::CMOCKA m)
add_test(NAME numerics_formats COMMAND numerics_formats_test)

add_executable(kernels_gemm_test ${VTRN_ROOT}/common/kernels/test/test_gemm.cpp)
target_link_libraries(kernels_gemm_test PRIVATE vtrn_common PkgConfig::CMOCKA m)
# Its bit-exact check mirrors the kernel's operations in scalar code, which
# must not be contracted into FMAs either.
target_compile_options(kernels_gemm_test PRIVATE -ffp-contract=off)
add_test(NAME kernels_gemm COMMAND kernels_gemm_test)

add_executable(kernels_elementwise_test ${VTRN_ROOT}/common/kernels/test/test_elementwise.cpp)
target_link_libraries(kernels_elementwise_test PRIVATE vtrn_common PkgConfig::CMOCKA m)
add_test(NAME kernels_elementwise COMMAND kernels_elementwise_test)
