// The token bucket moved to proto/cpp/token_bucket.h (the cache node and the emulator use it
// too); the load generator keeps its name for it.
#pragma once

#include "../../proto/cpp/token_bucket.h"

namespace exo::loadgen {
using exo::TokenBucket;
}  // namespace exo::loadgen
