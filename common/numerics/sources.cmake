# Portable sources of the number formats (common/numerics) and the compute
# kernels (common/kernels), for both builds: the host (numerics.cmake,
# included from common/CMakeLists.txt) and the firmware (include this file,
# compile VTRN_NUMERICS_SOURCES, add VTRN_NUMERICS_INCLUDES). Freestanding
# C++20: no heap, no exceptions; gelu_range calls erff from the C library.
# The host reference (gemm_reference.cpp) allocates and is host only:
# VTRN_NUMERICS_HOST_SOURCES.
set(VTRN_NUMERICS_INCLUDES
  ${VTRN_ROOT}/common/numerics/include
  ${VTRN_ROOT}/common/kernels/include)
set(VTRN_NUMERICS_SOURCES
  ${VTRN_ROOT}/common/numerics/numerics.cpp
  ${VTRN_ROOT}/common/kernels/gemm.cpp
  ${VTRN_ROOT}/common/kernels/elementwise.cpp)
set(VTRN_NUMERICS_HOST_SOURCES
  ${VTRN_ROOT}/common/kernels/gemm_reference.cpp)
# No fused multiply-add: the chip (AArch64 would contract a*b+c into FMLA)
# and the host (x86-64 without FMA) then perform the same IEEE operations in
# the same order, so kernel results are bit-identical on both, which the
# native benchmark and the jobs' verification rely on. Under TCG it is also
# faster: FMUL+FADD beat FMLA by about 20% (QEMU 7.2 runs FMLA lanes through
# the host's fmaf). Source properties are per directory: set here, they apply
# to whichever target in the including directory compiles these sources.
set_source_files_properties(${VTRN_NUMERICS_SOURCES} ${VTRN_NUMERICS_HOST_SOURCES}
  PROPERTIES COMPILE_OPTIONS -ffp-contract=off)
