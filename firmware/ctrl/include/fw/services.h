// The chip's service table (firmware/services.cpp), in boot order. fw_main
// iterates it; it names no service itself.
#pragma once

#include <span>

#include "fw/service.h"

namespace fw {

std::span<Service* const> services();

}  // namespace fw
