// The native reference for `vtrn bench ping`: an eventfd ping-pong between
// two processes on this host, measured in the same run as the chip's control
// queue so the ratio between them survives a noisy, shared machine.
//
// It mirrors what vtrnd does for one WAIT_BLOCK ping: signal an eventfd, then
// sleep in the kernel until the other side signals back. The parent waits
// with poll() (as vtrnd waits with epoll) and then reads; the child blocks in
// read(). Both processes are left wherever the scheduler puts them, as vtrnd
// and QEMU are. It is not a spin benchmark: the blocking wake-up is the cost
// being compared.
#pragma once

#include <stdint.h>

#include <vector>

#include "vtrn/drv/error.h"

namespace tools {

// Runs `warmup` unmeasured and then `count` measured round trips and
// returns the `count` round-trip times in ns. kSystem if a fork, eventfd,
// poll, read or write fails or the partner exits with a failure; kTimeout
// if the partner stops answering for 5 s.
drv::Result<std::vector<uint64_t>> native_eventfd_pingpong(uint32_t count, uint32_t warmup);

}  // namespace tools
