// libFuzzer target: the cached-write coordinator's pure state machines (src/coordinator/) in
// the model world of coordinator_model.h, which checks the coordinator's invariants (listed
// there) on every input. Links the pure library only: no RocksDB, no gRPC.
#include <cstddef>
#include <cstdint>

#include "coordinator_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  exo::db::model::run(data, size);
  return 0;
}
