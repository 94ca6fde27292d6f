# Compiles every HAL driver and QEMU-backend source with the firmware's
# flags (cmake/aarch64-baremetal.cmake) and fails on the first error or
# warning. Run by the hal_firmware_flags ctest: cmake -P with CXX, INCLUDES,
# SOURCES, OUT defined.
file(MAKE_DIRECTORY ${OUT})
foreach(src ${SOURCES})
  get_filename_component(name ${src} NAME_WE)
  execute_process(
    COMMAND ${CXX} --specs=picolibc.specs -ffreestanding -fno-exceptions -fno-rtti
            -fno-threadsafe-statics -mcpu=cortex-a53 -mstrict-align -mno-outline-atomics
            -std=c++20 -O2 -Wall -Wextra -Werror -Wno-unused-parameter
            ${INCLUDES} -c ${src} -o ${OUT}/${name}.o
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "firmware flags: ${src} failed to compile:\n${out}")
  endif()
  message(STATUS "firmware flags: ${name} ok")
endforeach()
