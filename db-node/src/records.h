// On-disk formats of the db node's bookkeeping column families (store.h). Fixed-width integers
// are big-endian, so a scan returns records in numeric order.
//
//   Cf::kRequests  key   = client_id (4) | seq (4)                      (RequestId)
//                  value = status (1) | fingerprint (8) | recorded_ms (8)  (DedupRecord)
//   Cf::kTxlog     key   = txid (8) | decision (1: 'C' commit, 'A' abort)
//                  value = len(cache_node) (1) | cache_node | key
//   Cf::kCached    key   = client key, value = cache node name (no encoding)
//
// A txlog record says "the cache node `cache_node` must be told `decision` for `txid` of `key`";
// it exists from the moment the decision is durable until the cache node acknowledged it
// (docs/two-phase-commit.md). The decision is part of the record's key so that the abort
// record of a transaction can be written while RocksDB still holds the lock on its (never to
// be committed) commit record.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "store.h"

namespace exo::db {

// A request's identity on the wire: (client_id, seq) from the Exoskeleton header.
struct RequestId {
  uint32_t client_id = 0;
  uint32_t seq = 0;
  uint64_t packed() const { return uint64_t{client_id} << 32 | seq; }
  bool operator==(const RequestId&) const = default;
};

std::string request_key(RequestId id);
bool parse_request_key(std::string_view k, RequestId* id);

// What a write with a given request id did, kept so that a resend is answered, not re-applied.
struct DedupRecord {
  uint8_t status = 0;        // wire status replied: OK, BUSY or ERROR
  uint64_t fingerprint = 0;  // request_fingerprint() of the first write: counts a reused id
                             // (duplicate_id_conflicts); dedup is by id alone
  uint64_t recorded_ms = 0;  // wall clock (ms since the epoch) when answered: survives restarts
};

std::string encode_dedup(const DedupRecord& r);
bool decode_dedup(std::string_view v, DedupRecord* r);

// Hash of what a write does (opcode, key, value). Two requests with one id but different
// fingerprints are different writes under one id (a client reusing it, or two clients that
// drew the same random client_id): the second is answered the first's outcome, not applied.
uint64_t request_fingerprint(uint8_t opcode, Bytes key, Bytes value);

enum class Decision : uint8_t { kCommit = 'C', kAbort = 'A' };
const char* to_string(Decision d);

std::string txlog_key(uint64_t txid, Decision d);
bool parse_txlog_key(std::string_view k, uint64_t* txid, Decision* d);
// cache_node is at most 255 bytes (cluster config names are short; longer is refused).
bool encode_txlog_value(std::string_view cache_node, std::string_view key, std::string* out);
bool decode_txlog_value(std::string_view v, std::string* cache_node, std::string* key);

}  // namespace exo::db
