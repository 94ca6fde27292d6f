# firmware/jobs: job validation, the scheduler (priorities, per-client round
# robin, cancel/timeout, exactly one end event, row split over executors,
# threaded executors) and fw::cores bookkeeping.
find_package(Threads REQUIRED)
add_executable(fw_jobs_test
  ${VTRN_ROOT}/firmware/jobs/test/test_jobs.cpp
  ${VTRN_ROOT}/firmware/jobs/job_model.cpp
  ${VTRN_ROOT}/firmware/jobs/job_sched.cpp
  ${VTRN_ROOT}/firmware/jobs/cores.cpp)
target_include_directories(fw_jobs_test PRIVATE
  ${VTRN_ROOT}/firmware/jobs/include ${VTRN_ROOT}/firmware/ctrl/include)
target_link_libraries(fw_jobs_test PRIVATE
  vtrn_common vtrn_proto PkgConfig::PROTOBUF_C PkgConfig::CMOCKA Threads::Threads)
add_test(NAME fw_jobs COMMAND fw_jobs_test)
