# Hooks the libFuzzer harnesses (tests/fuzz/) into the main build; the
# top-level CMakeLists.txt include()s this file.
#
# The main build uses g++, libFuzzer needs clang, so tests/fuzz is its own
# CMake project added with ExternalProject_Add (like firmware/), configured
# with clang and built as part of ALL into <build>/fuzz. This file then
# registers two ctests per harness, both labelled "fuzz":
#   fuzz_<name>_corpus  replays every committed input in tests/fuzz/corpus/<name>/
#                       (seeds and regress-* inputs of past crashes) once, no fuzzing;
#   fuzz_<name>_run     fuzzes for VTRN_FUZZ_SECONDS from a scratch copy of
#                       that corpus (tests/fuzz/run_fuzzer.cmake).
# With the default 20 s the seven harnesses take about 2.5 minutes serially and
# one with `ctest -j2`. `ctest -L fuzz` runs only these; `-LE fuzz` skips them.
option(VTRN_BUILD_FUZZERS "Build the libFuzzer harnesses in tests/fuzz with clang" ON)
set(VTRN_FUZZ_SECONDS 20 CACHE STRING "Seconds each fuzz_<name>_run ctest fuzzes")

if(VTRN_REQUIRE_ALL_TESTS AND NOT VTRN_BUILD_FUZZERS)
  message(FATAL_ERROR "VTRN_REQUIRE_ALL_TESTS: VTRN_BUILD_FUZZERS is OFF (a cached value?), so no fuzz "
                      "test would run; reconfigure with -DVTRN_BUILD_FUZZERS=ON")
endif()
# A crash, leak or timeout input that libFuzzer left in tests/fuzz/ is
# replayed by nothing: it belongs in corpus/<name>/ as regress-<what>.
file(GLOB _fuzz_strays ${VTRN_ROOT}/tests/fuzz/crash-* ${VTRN_ROOT}/tests/fuzz/leak-*
     ${VTRN_ROOT}/tests/fuzz/timeout-* ${VTRN_ROOT}/tests/fuzz/oom-*)
if(_fuzz_strays)
  message(FATAL_ERROR "fuzzer artifacts outside the corpus, never replayed: ${_fuzz_strays}; "
                      "move each into tests/fuzz/corpus/<harness>/regress-<what-it-broke>")
endif()

if(VTRN_BUILD_FUZZERS)
  find_program(VTRN_FUZZ_CLANGXX NAMES clang++ clang++-14)
  find_program(VTRN_FUZZ_CLANG NAMES clang clang-14)
  if(NOT VTRN_FUZZ_CLANGXX OR NOT VTRN_FUZZ_CLANG)
    message(FATAL_ERROR "fuzzers need clang (scripts/install-deps.sh installs it); "
                        "configure with -DVTRN_BUILD_FUZZERS=OFF to build without them")
  endif()

  # Debian ships the libFuzzer runtime in libclang-rt-14-dev, which clang
  # only recommends: probe the link once so a missing runtime is a clear
  # configure error, not a failure deep inside the sub-build.
  if(NOT VTRN_FUZZ_LINK_OK)
    set(_probe ${CMAKE_BINARY_DIR}/fuzz-probe)
    file(WRITE ${_probe}/probe.cpp
         "#include <stddef.h>\n#include <stdint.h>\n"
         "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
    execute_process(
      COMMAND ${VTRN_FUZZ_CLANGXX} -fsanitize=fuzzer,address,undefined probe.cpp -o probe
      WORKING_DIRECTORY ${_probe}
      RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_VARIABLE _err)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "${VTRN_FUZZ_CLANGXX} cannot link -fsanitize=fuzzer,address,undefined "
                          "(Debian: install libclang-rt-14-dev); or configure with "
                          "-DVTRN_BUILD_FUZZERS=OFF.\n${_err}")
    endif()
    set(VTRN_FUZZ_LINK_OK ON CACHE INTERNAL "clang links libFuzzer")
  endif()

  include(ExternalProject)
  set(VTRN_FUZZ_BIN ${CMAKE_BINARY_DIR}/fuzz)
  ExternalProject_Add(fuzzers
    SOURCE_DIR ${VTRN_ROOT}/tests/fuzz
    BINARY_DIR ${VTRN_FUZZ_BIN}
    CMAKE_ARGS
      -DCMAKE_CXX_COMPILER=${VTRN_FUZZ_CLANGXX}
      -DCMAKE_C_COMPILER=${VTRN_FUZZ_CLANG}
      -DCMAKE_BUILD_TYPE=RelWithDebInfo
      -DVTRN_ROOT=${VTRN_ROOT}
      -G ${CMAKE_GENERATOR}
    BUILD_ALWAYS ON
    INSTALL_COMMAND ""
    USES_TERMINAL_BUILD ON)

  set(VTRN_FUZZERS ctrl_ring dma_queue layout log_reader board_dtb ctrl_decode job_file)
  foreach(name IN LISTS VTRN_FUZZERS)
    set(_exe ${VTRN_FUZZ_BIN}/fuzz_${name})
    set(_corpus ${VTRN_ROOT}/tests/fuzz/corpus/${name})
    set(_work ${VTRN_FUZZ_BIN}/work/${name})
    file(GLOB _inputs ${_corpus}/*)
    if(NOT _inputs)
      message(FATAL_ERROR "tests/fuzz/corpus/${name}/ is empty: fuzz_${name}_corpus would replay nothing "
                          "(tests/fuzz/make_seeds.py writes the seeds)")
    endif()
    # -runs=0: execute each input of the corpus once and stop.
    add_test(NAME fuzz_${name}_corpus
             COMMAND ${_exe} -runs=0 -rss_limit_mb=1024 -timeout=10
                     -artifact_prefix=${VTRN_FUZZ_BIN}/replay-${name}- ${_corpus})
    add_test(NAME fuzz_${name}_run
             COMMAND ${CMAKE_COMMAND} -DFUZZER=${_exe} -DCORPUS=${_corpus} -DWORK=${_work}
                     -DSECONDS=${VTRN_FUZZ_SECONDS} -P ${VTRN_ROOT}/tests/fuzz/run_fuzzer.cmake)
    set_tests_properties(fuzz_${name}_corpus PROPERTIES LABELS fuzz TIMEOUT 60
      ENVIRONMENT "UBSAN_OPTIONS=print_stacktrace=1")
    math(EXPR _timeout "${VTRN_FUZZ_SECONDS} + 60")
    # A fuzz run keeps a core busy for its whole time: on a 2-core machine
    # it must not share the cores with the QEMU tests, whose chips would
    # then miss their timers (the lock the integration tests hold).
    set_tests_properties(fuzz_${name}_run PROPERTIES LABELS fuzz TIMEOUT ${_timeout}
      ENVIRONMENT "UBSAN_OPTIONS=print_stacktrace=1"
      RESOURCE_LOCK vtrn_qemu)
  endforeach()
endif()
