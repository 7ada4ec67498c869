#include "insert_fetched.h"

#include <algorithm>
#include <map>
#include <set>

namespace exo::cache {

InsertOutcome insert_fetched(CacheState& state, const Keys& want, const FetchResult& fetched,
                             size_t max_kv_bytes) {
  InsertOutcome out;
  std::map<std::string_view, const std::string*> values;
  for (const auto& [k, v] : fetched.found) values.emplace(k, &v);
  const std::set<std::string_view> failed(fetched.failed.begin(), fetched.failed.end());

  for (const auto& k : want) {
    auto node = state.fetching.extract(k);
    const FetchState fs = node.empty() ? FetchState{} : std::move(node.mapped());
    if (failed.count(k)) {
      out.failed.push_back(k);
      continue;
    }
    if (fs.cancelled) {
      out.cancelled.push_back(k);
      continue;
    }
    // A write committed while we were fetching is newer than what the db node returned.
    const std::string* value = nullptr;
    if (fs.committed) value = fs.committed_delete ? nullptr : &fs.committed_value;
    else if (auto it = values.find(k); it != values.end()) value = it->second;
    // Not found on the db node (or deleted meanwhile), or too big to ever fit a reply frame.
    if (!value || k.size() + value->size() > max_kv_bytes) {
      out.not_cached.push_back(k);
      continue;
    }
    state.map.insert(k, *value, &out.evicted);
    if (fs.prepared) state.map.prepare(k, fs.txid, fs.prepared_delete, fs.prepared_value);
    out.inserted.push_back(k);
  }
  // A batch larger than the free space evicts its own first keys: those are not cached any more
  // (they are in `evicted`).
  std::erase_if(out.inserted, [&](const std::string& k) { return !state.map.find(k); });
  for (const auto& k : out.evicted) {
    state.retiring.erase(k);
    state.removing.erase(k);
  }
  return out;
}

}  // namespace exo::cache
