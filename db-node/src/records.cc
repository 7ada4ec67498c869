#include "records.h"

#include <xxhash.h>

namespace exo::db {
namespace {

void put_be(std::string* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t get_be(std::string_view s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | static_cast<uint8_t>(s[at + i]);
  return v;
}

}  // namespace

std::string request_key(RequestId id) {
  std::string k;
  put_be(&k, id.packed(), 8);
  return k;
}

bool parse_request_key(std::string_view k, RequestId* id) {
  if (k.size() != 8) return false;
  const uint64_t v = get_be(k, 0, 8);
  *id = RequestId{static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v)};
  return true;
}

std::string encode_dedup(const DedupRecord& r) {
  std::string v;
  v.push_back(static_cast<char>(r.status));
  put_be(&v, r.fingerprint, 8);
  put_be(&v, r.recorded_ms, 8);
  return v;
}

bool decode_dedup(std::string_view v, DedupRecord* r) {
  if (v.size() != 17) return false;
  r->status = static_cast<uint8_t>(v[0]);
  r->fingerprint = get_be(v, 1, 8);
  r->recorded_ms = get_be(v, 9, 8);
  return true;
}

uint64_t request_fingerprint(uint8_t opcode, Bytes key, Bytes value) {
  // Key and value hashed separately and chained, so ("ab","c") and ("a","bc") differ.
  const uint64_t k = XXH64(key.data(), key.size(), opcode);
  return XXH64(value.data(), value.size(), k);
}

const char* to_string(Decision d) { return d == Decision::kCommit ? "Commit" : "Abort"; }

std::string txlog_key(uint64_t txid, Decision d) {
  std::string k;
  put_be(&k, txid, 8);
  k.push_back(static_cast<char>(d));
  return k;
}

bool parse_txlog_key(std::string_view k, uint64_t* txid, Decision* d) {
  if (k.size() != 9) return false;
  const char c = k[8];
  if (c != static_cast<char>(Decision::kCommit) && c != static_cast<char>(Decision::kAbort))
    return false;
  *txid = get_be(k, 0, 8);
  *d = static_cast<Decision>(c);
  return true;
}

bool encode_txlog_value(std::string_view cache_node, std::string_view key, std::string* out) {
  if (cache_node.size() > 255) return false;
  out->clear();
  out->push_back(static_cast<char>(cache_node.size()));
  out->append(cache_node);
  out->append(key);
  return true;
}

bool decode_txlog_value(std::string_view v, std::string* cache_node, std::string* key) {
  if (v.empty()) return false;
  const size_t n = static_cast<uint8_t>(v[0]);
  if (v.size() < 1 + n + 1) return false;  // a key is at least one byte
  cache_node->assign(v.substr(1, n));
  key->assign(v.substr(1 + n));
  return true;
}

}  // namespace exo::db
