# Compiles one board .dts with dtc and fails on any diagnostic.
#
# dtc 1.6 has no -Werror: warnings (unit address without reg, bad #cells,
# and so on) go to stderr while dtc still exits 0 and writes the blob. A
# board with a dtc warning is a board a reviewer would send back, so this
# wrapper turns any stderr output into a failed build and removes the output.
#
# Usage: cmake -DDTC=<dtc> -DDTS_FILE=<file.dts> -DDTB_FILE=<file.dtb> -P dtc-strict.cmake
foreach(var DTC DTS_FILE DTB_FILE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "dtc-strict.cmake: ${var} is not set")
  endif()
endforeach()

execute_process(
  COMMAND ${DTC} -I dts -O dtb -o ${DTB_FILE} ${DTS_FILE}
  RESULT_VARIABLE rc
  ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT err STREQUAL "")
  file(REMOVE ${DTB_FILE})
  message(FATAL_ERROR "dtc rejected ${DTS_FILE} (exit ${rc}):\n${err}")
endif()
