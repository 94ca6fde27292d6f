// The dtype of both protocols (vtrn.types.JobDType, proto/vtrn_types.proto)
// is carried as vtrn::num::DType (common/numerics, which cannot see the
// protocol): the firmware's job model and the host's name tables cast one to
// the other, so the numbers must agree. Included by each side that casts;
// nothing else.
#pragma once

#include <stdint.h>

#include "vtrn/numerics.h"
#include "vtrn_types.pb-c.h"

static_assert(uint32_t(vtrn::num::DType::kF32) == VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32);
static_assert(uint32_t(vtrn::num::DType::kBF16) == VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_BF16);
static_assert(uint32_t(vtrn::num::DType::kFP8E4M3) == VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_FP8_E4M3);
static_assert(uint32_t(vtrn::num::DType::kFP8E5M2) == VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_FP8_E5M2);
static_assert(uint32_t(vtrn::num::DType::kMXFP4) == VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_MXFP4);
static_assert(vtrn::num::kDTypeCount == VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_MXFP4 + 1);
