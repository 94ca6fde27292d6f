# Host tests of the power/thermal core (common/power, power_*) and
# power_bench. Included from common/CMakeLists.txt; the sources themselves are
# part of vtrn_common (common/sources.cmake), which the firmware compiles too.

find_package(Threads REQUIRED)
foreach(_t model thermal policy device telemetry)
  add_executable(power_${_t}_test ${VTRN_ROOT}/common/power/test/test_power_${_t}.cpp)
  target_link_libraries(power_${_t}_test PRIVATE vtrn_common PkgConfig::CMOCKA Threads::Threads)
  add_test(NAME power_${_t} COMMAND power_${_t}_test)
endforeach()

add_executable(power_bench ${VTRN_ROOT}/common/power/test/bench_power.cpp)
target_link_libraries(power_bench PRIVATE vtrn_common)
