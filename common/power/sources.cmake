# Portable sources of the power/thermal core, for both builds: the host
# (power.cmake, included from common/CMakeLists.txt) and the firmware
# (include this file, compile VTRN_POWER_SOURCES, add VTRN_POWER_INCLUDES).
# Plain C++20: no libm, no heap, no exceptions, no RTTI.
set(VTRN_POWER_INCLUDES ${VTRN_ROOT}/common/power/include)
set(VTRN_POWER_SOURCES
  ${VTRN_ROOT}/common/power/fixed_point.cpp
  ${VTRN_ROOT}/common/power/power_config.cpp
  ${VTRN_ROOT}/common/power/power_model.cpp
  ${VTRN_ROOT}/common/power/thermal.cpp
  ${VTRN_ROOT}/common/power/governor.cpp
  ${VTRN_ROOT}/common/power/device_pm.cpp
  ${VTRN_ROOT}/common/power/power_manager.cpp)
