# firmware/jobs: job validation, the scheduler (priorities, per-client round
# robin, cancel/timeout, exactly one end event, row split over executors,
# threaded executors) and fw::cores bookkeeping.
find_package(Threads REQUIRED)
fw_host_test(jobs jobs SOURCES job_model.cpp job_sched.cpp cores.cpp
  INCLUDES ${VTRN_ROOT}/firmware/ctrl/include
  LIBS vtrn_common vtrn_proto PkgConfig::PROTOBUF_C Threads::Threads)
