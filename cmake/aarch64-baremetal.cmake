# Toolchain for the bare-metal firmware: Debian's aarch64-linux-gnu GCC with
# picolibc as the C library. The cross libstdc++ is built for glibc, so it is
# never linked: the firmware uses only freestanding C++ headers. Debian's
# arm64 libfdt.a and libprotobuf-c.a come from the sysroot that
# scripts/install-deps.sh unpacks.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_ASM_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

# -mno-outline-atomics: outline atomics call getauxval, which bare metal lacks.
# -mstrict-align: the MMU may be off, and device memory faults on unaligned access.
# -fno-asynchronous-unwind-tables -fno-unwind-tables: the call-frame info goes
# to .debug_frame, which the image keeps for gdb, instead of .eh_frame, which
# boot/firmware.ld discards (nothing unwinds at run time: no exceptions). gdb
# needs it to walk and to end a backtrace (boot/start.S marks the outermost frames).
set(_vtrn_fw_flags "--specs=picolibc.specs -ffreestanding -mcpu=cortex-a53 -mstrict-align -mno-outline-atomics -fno-common -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables -fno-unwind-tables")
set(CMAKE_C_FLAGS_INIT "${_vtrn_fw_flags}")
set(CMAKE_CXX_FLAGS_INIT "${_vtrn_fw_flags} -fno-exceptions -fno-rtti -fno-threadsafe-statics -fno-use-cxa-atexit")
set(CMAKE_ASM_FLAGS_INIT "-mcpu=cortex-a53")
# The specs already come with the compile flags (CMake passes them to the link
# too; gcc refuses them twice). -static: otherwise gcc emits a dynamic
# executable with an .interp section.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static -nostartfiles -Wl,--gc-sections")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
