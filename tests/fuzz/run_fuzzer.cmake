# Runs one fuzzer for a bounded time, for the fuzz_<name>_run ctests that
# tests/fuzz/fuzz.cmake registers: `cmake -DFUZZER=<binary> -DCORPUS=<dir>
# -DWORK=<dir> -DSECONDS=<n> -P run_fuzzer.cmake`.
#
# libFuzzer writes every new interesting input into its first corpus
# directory, so it fuzzes a fresh copy in WORK and the committed corpus is
# never modified by a test run. A crash leaves its input in WORK/artifacts;
# the failure message says how to keep it as a regression input.
foreach(v FUZZER CORPUS WORK SECONDS)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_fuzzer.cmake: -D${v}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
file(COPY ${CORPUS}/ DESTINATION ${WORK}/corpus)

execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -rss_limit_mb=1024 -timeout=10
          -print_final_stats=1 -artifact_prefix=${WORK}/artifacts/ ${WORK}/corpus
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(GLOB found ${WORK}/artifacts/*)
  message(FATAL_ERROR
    "${FUZZER} failed (${rc}); input(s): ${found}\n"
    "Reproduce with `${FUZZER} <input>`. After fixing, copy the input into ${CORPUS}/ "
    "as regress-<what-it-broke> so the corpus replay test keeps it fixed.")
endif()
