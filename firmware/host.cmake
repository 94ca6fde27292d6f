# Host-side unit tests of firmware logic that has no hardware in it. Included
# by the top-level CMakeLists.txt (include(${VTRN_ROOT}/firmware/host.cmake))
# after the vtrn_proto target exists; the sources are the same files the
# firmware image compiles for AArch64.
#
# fw_service_host is the service framework every service's request handling
# runs through (the dispatcher, its validator and the route table code, the
# protobuf-c arena); each folder registers its own tests in
# <folder>/test/host.cmake, so a new service brings its tests with it.
add_library(fw_service_host STATIC
  ${VTRN_ROOT}/firmware/ctrl/ctrl_dispatch.cpp
  ${VTRN_ROOT}/firmware/ctrl/service.cpp
  ${VTRN_ROOT}/firmware/ctrl/pb_arena.cpp)
target_include_directories(fw_service_host PUBLIC ${VTRN_ROOT}/firmware/ctrl/include)
target_link_libraries(fw_service_host PUBLIC vtrn_common vtrn_proto PkgConfig::PROTOBUF_C)

# fw_host_test(<name> <folder> SOURCES ... [LIBS ...]): the test binary
# fw_<name>_test from the folder's test/test_<name>.cpp and the listed
# firmware sources (relative to firmware/<folder>/), with that folder's
# include/ and CMocka, registered as ctest fw_<name>.
function(fw_host_test name folder)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;INCLUDES" ${ARGN})
  set(_dir ${VTRN_ROOT}/firmware/${folder})
  list(TRANSFORM T_SOURCES PREPEND ${_dir}/)
  add_executable(fw_${name}_test ${_dir}/test/test_${name}.cpp ${T_SOURCES})
  target_include_directories(fw_${name}_test PRIVATE ${_dir}/include ${T_INCLUDES})
  target_link_libraries(fw_${name}_test PRIVATE ${T_LIBS} PkgConfig::CMOCKA)
  add_test(NAME fw_${name} COMMAND fw_${name}_test)
endfunction()

file(GLOB _fw_host_tests CONFIGURE_DEPENDS ${VTRN_ROOT}/firmware/*/test/host.cmake)
foreach(t ${_fw_host_tests})
  include(${t})
endforeach()
