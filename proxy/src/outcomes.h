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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "counter_list.h"

#include "request_engine.h"
#include "text_protocol.h"

namespace exo::proxy {

inline constexpr std::string_view kProxyVersion = "0.1.0";

// Proxy-wide counters for `stats` and /metrics, generated from EXO_PROXY_COUNTERS
// (common/cpp/counter_list.h). Owned by the event loop, whose one thread writes them; atomic only
// so that the /metrics listener's thread may read them while it runs.
struct Counters {
#define EXO_FIELD(name, kind, help) std::atomic<uint64_t> name{0};
  EXO_PROXY_COUNTERS(EXO_FIELD)
#undef EXO_FIELD
};

// (name, value) of every counter, in list order: the `stats` lines and the /metrics page.
inline std::vector<std::pair<std::string, uint64_t>> counter_values(const Counters& c) {
  std::vector<std::pair<std::string, uint64_t>> out;
#define EXO_OUT(name, kind, help) out.emplace_back(#name, c.name.load(std::memory_order_relaxed));
  EXO_PROXY_COUNTERS(EXO_OUT)
#undef EXO_OUT
  return out;
}

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
