// What exo-proxy answers, apart from the connection plumbing (session.h): which requests it
// refuses before the cluster sees them, and how cluster outcomes become memcached replies.
//
// The one rule that matters: a write is reported done (STORED, DELETED, HD) only on an OK reply.
// A write whose every resend went unanswered may or may not have been applied, so it answers
// `SERVER_ERROR outcome unknown`, never STORED; a write the cluster refused (BUSY, ERROR,
// BAD_REQUEST: definitely not applied) answers `SERVER_ERROR not stored: <reason>`.
//
// What the cluster cannot do is refused by name (CLIENT_ERROR ...) instead of being emulated
// badly: client flags and expiry (it stores neither), cas and add/replace (no atomic
// check-and-set), incr/decr/append/prepend/touch/gat/flush_all, and meta flags that need them.
// `gets` works and returns cas unique 0.
//
// A db node answers a DELETE of a missing key NOT_FOUND, which becomes NOT_FOUND (md: NF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "request_engine.h"
#include "text_protocol.h"

namespace exo::proxy {

inline constexpr std::string_view kProxyVersion = "0.1.0";

// Proxy-wide counters for `stats`. Owned by the event loop; everything runs on its one thread.
struct Counters {
  uint64_t curr_connections = 0, total_connections = 0, rejected_connections = 0;
  uint64_t slow_reader_closes = 0;  // connections closed for unsent output over the cap
  uint64_t cmd_get = 0, cmd_set = 0, cmd_delete = 0;  // per key, as memcached counts cmd_get
  uint64_t get_hits = 0, get_misses = 0, get_hits_from_cache = 0;
  uint64_t delete_hits = 0, delete_misses = 0;
  uint64_t refused = 0;           // requests answered CLIENT_ERROR/SERVER_ERROR before the cluster
  uint64_t cluster_timeouts = 0;  // cluster ops with no reply after every resend
  uint64_t cluster_errors = 0;    // cluster ops answered ERROR, BUSY or BAD_REQUEST (or unknown)
  uint64_t outcome_unknown = 0;   // writes answered `outcome unknown`
};

// The cluster op serving `cmd` (wire::kGet/kPut/kDelete), or 0 if it has none.
uint8_t cluster_op(Cmd cmd);

// The whole reply line ("CLIENT_ERROR ...\r\n") refusing `req` before the cluster sees it, or ""
// when the cluster can serve it. max_kv: the largest key + value one frame carries.
std::string refusal(const Request& req, size_t max_kv);

// Appends the reply to `req`, whose cluster ops (one per key, in key order) completed with
// `results`, honouring classic noreply and meta q. Updates the hit/miss/error counters.
void render(const Request& req, std::span<const client::Completion> results, std::string& out,
            Counters& counters);

}  // namespace exo::proxy
