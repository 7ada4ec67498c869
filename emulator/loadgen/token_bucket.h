// The token bucket moved to common/cpp/token_bucket.h (the cache node and the emulator use it
// too); the load generator keeps its name for it.
#pragma once

#include "../../common/cpp/token_bucket.h"

namespace exo::loadgen {
using exo::TokenBucket;
}  // namespace exo::loadgen
