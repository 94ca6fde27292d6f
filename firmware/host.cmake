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

# The platform DTB scan, on QEMU's own virt tree (fixture compiled with dtc).
set(_fw_virt_dtb ${CMAKE_CURRENT_BINARY_DIR}/firmware-test/qemu-virt.dtb)
add_custom_command(
  OUTPUT ${_fw_virt_dtb}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/firmware-test
  COMMAND ${DTC} -q -I dts -O dtb -o ${_fw_virt_dtb} ${VTRN_ROOT}/firmware/platform/test/qemu-virt.dts
  DEPENDS ${VTRN_ROOT}/firmware/platform/test/qemu-virt.dts
  COMMENT "dtc qemu-virt.dts (firmware platform test fixture)")
add_executable(fw_platform_scan_test
  ${VTRN_ROOT}/firmware/platform/test/test_platform_scan.cpp
  ${VTRN_ROOT}/firmware/platform/platform_scan.cpp
  ${VTRN_ROOT}/firmware/platform/bootargs.cpp
  ${_fw_virt_dtb})
target_include_directories(fw_platform_scan_test PRIVATE ${VTRN_ROOT}/firmware/platform/include)
target_compile_definitions(fw_platform_scan_test PRIVATE VTRN_QEMU_VIRT_DTB="${_fw_virt_dtb}")
target_link_libraries(fw_platform_scan_test PRIVATE vtrn_fdt PkgConfig::CMOCKA)
add_test(NAME fw_platform_scan COMMAND fw_platform_scan_test)

# firmware/dma: region setup, HBM range and the queue scheduler, over real
# vtrn::dma::Queue objects from vtrn_common.
add_executable(fw_dma_sched_test
  ${VTRN_ROOT}/firmware/dma/test/test_dma_sched.cpp
  ${VTRN_ROOT}/firmware/dma/dma_sched.cpp)
target_include_directories(fw_dma_sched_test PRIVATE ${VTRN_ROOT}/firmware/dma/include)
target_link_libraries(fw_dma_sched_test PRIVATE vtrn_common PkgConfig::CMOCKA)
add_test(NAME fw_dma_sched COMMAND fw_dma_sched_test)

# ---- HBM ----
# firmware/hbm: the HBM manager (owners, access check, ECC model, ctrl
# handlers) over the allocator core from vtrn_common.
add_executable(fw_hbm_manager_test
  ${VTRN_ROOT}/firmware/hbm/test/test_hbm_manager.cpp
  ${VTRN_ROOT}/firmware/hbm/hbm_manager.cpp
  ${VTRN_ROOT}/firmware/ctrl/pb_arena.cpp)
target_include_directories(fw_hbm_manager_test PRIVATE
  ${VTRN_ROOT}/firmware/hbm/include ${VTRN_ROOT}/firmware/ctrl/include)
target_link_libraries(fw_hbm_manager_test PRIVATE
  vtrn_common vtrn_proto PkgConfig::PROTOBUF_C PkgConfig::CMOCKA)
add_test(NAME fw_hbm_manager COMMAND fw_hbm_manager_test)
# ---- end HBM ----

# ---- jobs ----
# firmware/jobs: job validation, the scheduler (priorities, per-client round
# robin, cancel/timeout, exactly one end event, row split over executors,
# threaded executors) and fw::cores bookkeeping.
find_package(Threads REQUIRED)
add_executable(fw_jobs_test
  ${VTRN_ROOT}/firmware/jobs/test/test_jobs.cpp
  ${VTRN_ROOT}/firmware/jobs/job_model.cpp
  ${VTRN_ROOT}/firmware/jobs/job_sched.cpp
  ${VTRN_ROOT}/firmware/jobs/cores.cpp)
target_include_directories(fw_jobs_test PRIVATE ${VTRN_ROOT}/firmware/jobs/include)
target_link_libraries(fw_jobs_test PRIVATE
  vtrn_common vtrn_proto PkgConfig::PROTOBUF_C PkgConfig::CMOCKA Threads::Threads)
add_test(NAME fw_jobs COMMAND fw_jobs_test)
# ---- end jobs ----

# ---- collectives (links) ----
# firmware/collectives: the ring schedule, framing and reduction of one
# rank, several ranks joined by in-order frame queues.
add_executable(fw_collective_test
  ${VTRN_ROOT}/firmware/collectives/test/test_collective.cpp
  ${VTRN_ROOT}/firmware/collectives/collective.cpp)
target_include_directories(fw_collective_test PRIVATE ${VTRN_ROOT}/firmware/collectives/include)
target_link_libraries(fw_collective_test PRIVATE PkgConfig::CMOCKA)
add_test(NAME fw_collective COMMAND fw_collective_test)
# ---- end collectives ----

# ---- power ----
# firmware/power: board -> config, activity replay, D0/D3hot, throttling, cap,
# control requests and the pace delay, on a simulated clock.
add_executable(fw_power_service_test
  ${VTRN_ROOT}/firmware/power/test/test_power_service.cpp
  ${VTRN_ROOT}/firmware/power/power_controller.cpp
  ${VTRN_ROOT}/firmware/ctrl/pb_arena.cpp)
target_include_directories(fw_power_service_test PRIVATE
  ${VTRN_ROOT}/firmware/power/include ${VTRN_ROOT}/firmware/ctrl/include)
target_link_libraries(fw_power_service_test PRIVATE
  vtrn_common vtrn_fdt vtrn_proto PkgConfig::PROTOBUF_C PkgConfig::CMOCKA)
add_test(NAME fw_power_service COMMAND fw_power_service_test)
# ---- end power ----
