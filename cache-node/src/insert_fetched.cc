#include "insert_fetched.h"

namespace exo::cache {

InsertOutcome insert_fetched(CacheState& state, const Keys& want, const FetchResult& fetched,
                             size_t max_kv_bytes) {
  return state.keys.fetched(want, fetched.found, fetched.failed, max_kv_bytes);
}

}  // namespace exo::cache
