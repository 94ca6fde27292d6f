# The chip-to-chip link layer's host tests (link_*) and link_bench. Included
# from common/CMakeLists.txt; the link sources themselves are part of
# vtrn_common (common/sources.cmake), which the firmware compiles too.
set(VTRN_LINK_DIR ${VTRN_ROOT}/common/link)

add_executable(test_link ${VTRN_LINK_DIR}/test/test_link.cpp)
target_link_libraries(test_link PRIVATE vtrn_common PkgConfig::CMOCKA)
add_test(NAME link_port COMMAND test_link)

add_executable(test_link_fuzz ${VTRN_LINK_DIR}/test/test_link_fuzz.cpp)
target_link_libraries(test_link_fuzz PRIVATE vtrn_common PkgConfig::CMOCKA)
add_test(NAME link_hostile_peer COMMAND test_link_fuzz)

find_package(Threads REQUIRED)
add_executable(link_bench ${VTRN_LINK_DIR}/bench/link_bench.cpp)
target_link_libraries(link_bench PRIVATE vtrn_common Threads::Threads)
