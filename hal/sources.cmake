# HAL source lists, included by hal/CMakeLists.txt (host: fake backend and
# tests) and by firmware/CMakeLists.txt (QEMU backend). Paths are absolute so
# either build can include this file. The backend is chosen at link time:
# VTRN_HAL_SOURCES plus exactly one of VTRN_HAL_QEMU_SOURCES or
# VTRN_HAL_FAKE_SOURCES.
set(VTRN_HAL_INCLUDES
  ${VTRN_ROOT}/common/error/include
  ${VTRN_ROOT}/hal/mmio/include
  ${VTRN_ROOT}/hal/uart/include
  ${VTRN_ROOT}/hal/gic/include
  ${VTRN_ROOT}/hal/timer/include
  ${VTRN_ROOT}/hal/pcie/include
  ${VTRN_ROOT}/hal/ivshmem/include)

# Backend-independent driver logic (register sequences, validation, math).
set(VTRN_HAL_SOURCES
  ${VTRN_ROOT}/hal/mmio/src/status.cpp
  ${VTRN_ROOT}/hal/uart/src/pl011.cpp
  ${VTRN_ROOT}/hal/gic/src/gic.cpp
  ${VTRN_ROOT}/hal/gic/src/gicv2m.cpp
  ${VTRN_ROOT}/hal/timer/src/timer.cpp
  ${VTRN_ROOT}/hal/pcie/src/ecam.cpp
  ${VTRN_ROOT}/hal/pcie/src/enumerate.cpp
  ${VTRN_ROOT}/hal/ivshmem/src/ivshmem.cpp)

# Real hardware access (AArch64 inline asm): firmware only.
set(VTRN_HAL_QEMU_SOURCES
  ${VTRN_ROOT}/hal/mmio/src/mmio_qemu.cpp
  ${VTRN_ROOT}/hal/timer/src/timer_qemu.cpp)

# Host fake backend (RAM register file, timer variables) and the fake PCI
# config-space model shared by the pcie and ivshmem tests.
set(VTRN_HAL_FAKE_INCLUDES
  ${VTRN_ROOT}/hal/pcie/fake/include)
set(VTRN_HAL_FAKE_SOURCES
  ${VTRN_ROOT}/hal/mmio/src/mmio_fake.cpp
  ${VTRN_ROOT}/hal/timer/src/timer_fake.cpp
  ${VTRN_ROOT}/hal/pcie/fake/fake_ecam.cpp)

# hal/copy: the copy-engine facade and its DMA adapter are backend
# independent; hal_copy_memcpy is the AArch64 assembly on the chip and the C
# library's memcpy on the host. The adapter implements vtrn::dma::Copier, so
# the HAL includes see the shared ABI headers and common/dma.
list(APPEND VTRN_HAL_INCLUDES
  ${VTRN_ROOT}/hal/copy/include
  ${VTRN_ROOT}/include
  ${VTRN_ROOT}/common/hostif/include
  ${VTRN_ROOT}/common/dma/include)
list(APPEND VTRN_HAL_SOURCES
  ${VTRN_ROOT}/hal/copy/src/copy.cpp
  ${VTRN_ROOT}/hal/copy/src/copy_dma.cpp)
list(APPEND VTRN_HAL_QEMU_SOURCES
  ${VTRN_ROOT}/hal/copy/src/memcpy_aarch64.S)
list(APPEND VTRN_HAL_FAKE_INCLUDES
  ${VTRN_ROOT}/hal/copy/fake/include)
list(APPEND VTRN_HAL_FAKE_SOURCES
  ${VTRN_ROOT}/hal/copy/src/memcpy_host.cpp
  ${VTRN_ROOT}/hal/copy/fake/fake_copy.cpp)

# The hardware engines (vtrn-hw, include/vtrn/engine_abi.h): the engine
# region and DMA-engine backend of hal/copy, hal/tensor and hal/link (ABI 1.4). Backend
# independent: register words go through hal::mmio.
list(APPEND VTRN_HAL_INCLUDES
  ${VTRN_ROOT}/hal/tensor/include
  ${VTRN_ROOT}/hal/link/include)
list(APPEND VTRN_HAL_SOURCES
  ${VTRN_ROOT}/hal/copy/src/copy_engine.cpp
  ${VTRN_ROOT}/hal/tensor/src/tensor.cpp
  ${VTRN_ROOT}/hal/link/src/link.cpp)
