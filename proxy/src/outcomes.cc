#include "outcomes.h"

#include "wire.h"

namespace exo::proxy {
namespace {

std::string client_error(std::string_view msg) { return "CLIENT_ERROR " + std::string(msg) + "\r\n"; }

const char* command_name(Cmd cmd) {
  switch (cmd) {
    case Cmd::kAppend: return "append";
    case Cmd::kPrepend: return "prepend";
    case Cmd::kIncr: return "incr";
    case Cmd::kDecr: return "decr";
    case Cmd::kTouch: return "touch";
    case Cmd::kGat: return "gat";
    case Cmd::kGats: return "gats";
    case Cmd::kFlushAll: return "flush_all";
    case Cmd::kMetaArithmetic: return "ma";
    case Cmd::kMetaDebug: return "me";
    default: return "this command";
  }
}

// Meta flags that would need what the cluster lacks (expiry, cas, invalidation, vivify), per
// command; the return flags (f c t s k O q b ...) are all served.
std::string_view refused_meta_flags(Cmd cmd) {
  switch (cmd) {
    case Cmd::kMetaGet: return "ENRT";    // E new cas, N vivify, R recache, T touch
    case Cmd::kMetaSet: return "CEIN";    // C compare cas, E new cas, I invalidate, N vivify
    case Cmd::kMetaDelete: return "CEITx";  // C compare cas, E, I invalidate, T, x keep item
    default: return "";
  }
}

std::string too_large_or_empty(const Request& req, size_t max_kv) {
  const std::string& key = req.keys[0];
  if (key.empty() || key.size() > wire::kMaxKeyLen) return client_error("bad command line format");
  if (key.size() + req.value.size() > max_kv) return "SERVER_ERROR object too large for cache\r\n";
  return "";
}

// Why the cluster did not serve an op, for SERVER_ERROR lines.
std::string reason(int status) {
  switch (status) {
    case -1: return "cluster did not answer";
    case wire::kError: return "cluster error";
    case wire::kBusy: return "cluster busy";
    case wire::kBadRequest: return "cluster rejected the request";
    default: return "unexpected cluster status " + std::to_string(status);
  }
}

// Did the cluster say for sure that a write was not applied?
bool refused_write(int status) {
  return status == wire::kError || status == wire::kBusy || status == wire::kBadRequest;
}

void server_error(std::string& out, std::string_view msg) { reply::server_error(out, msg); }

void count_failure(int status, Counters& c) {
  if (status == -1) ++c.cluster_timeouts;
  else ++c.cluster_errors;
}

// get/gets (one result per key) and mg.
void render_get(const Request& req, std::span<const client::Completion> results, std::string& out, Counters& c) {
  // One failed key fails the whole request: a multi-get that quietly dropped a key would read
  // as a miss, which the cluster never said.
  for (const client::Completion& r : results) {
    if (r.status == wire::kOk || r.status == wire::kNotFound) continue;
    for (const client::Completion& f : results) {
      if (f.status != wire::kOk && f.status != wire::kNotFound) count_failure(f.status, c);
    }
    server_error(out, reason(r.status));
    return;
  }
  for (const client::Completion& r : results) {
    if (r.status == wire::kOk) {
      ++c.get_hits;
      if (r.flags & wire::kFromCache) ++c.get_hits_from_cache;
    } else {
      ++c.get_misses;
    }
  }
  if (req.cmd == Cmd::kMetaGet) {
    const client::Completion& r = results[0];
    if (r.status == wire::kNotFound) {
      if (!(req.meta.quiet() && reply::quiet_suppresses(req.cmd, reply::MetaOutcome::kMiss)))
        reply::meta_miss(out, req);
      return;
    }
    // No client flags, no cas, no expiry in the cluster: f0, c0, t-1 (never expires).
    reply::MetaItem item{0, 0, -1, r.value.size(), std::nullopt, std::nullopt};
    if (req.meta.value()) reply::meta_value(out, req, item, r.value);
    else reply::meta_hit_no_value(out, req, item);
    return;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].status != wire::kOk) continue;
    reply::value(out, req.keys[i], 0, results[i].value,
                 req.cmd == Cmd::kGets ? std::optional<uint64_t>(0) : std::nullopt);
  }
  reply::end(out);
}

// set/ms and delete/md: one result.
void render_write(const Request& req, const client::Completion& r, std::string& out, Counters& c) {
  const bool meta = is_meta(req.cmd);
  const bool del = req.cmd == Cmd::kDelete || req.cmd == Cmd::kMetaDelete;
  if (r.status == wire::kOk) {
    if (del) ++c.delete_hits;
    if (!meta) del ? reply::deleted(out) : reply::stored(out);
    else if (!(req.meta.quiet() && reply::quiet_suppresses(req.cmd, reply::MetaOutcome::kHit)))
      reply::meta_hit_no_value(out, req, reply::MetaItem{});
    return;
  }
  if (del && r.status == wire::kNotFound) {
    ++c.delete_misses;
    meta ? reply::meta_not_found(out, req) : reply::not_found(out);
    return;
  }
  count_failure(r.status, c);
  if (refused_write(r.status)) {
    server_error(out, std::string(del ? "not deleted: " : "not stored: ") + reason(r.status));
    return;
  }
  // No reply (or one we cannot read): any copy may have been applied.
  ++c.outcome_unknown;
  server_error(out, "outcome unknown");
}

}  // namespace

uint8_t cluster_op(Cmd cmd) {
  switch (cmd) {
    case Cmd::kGet: case Cmd::kGets: case Cmd::kMetaGet: return wire::kGet;
    case Cmd::kSet: case Cmd::kMetaSet: return wire::kPut;
    case Cmd::kDelete: case Cmd::kMetaDelete: return wire::kDelete;
    default: return 0;
  }
}

std::string refusal(const Request& req, size_t max_kv) {
  switch (req.cmd) {
    case Cmd::kCas:
      return client_error("cas not supported");
    case Cmd::kAdd: case Cmd::kReplace:
      return client_error("add/replace not supported (no atomic check-and-set in the cluster)");
    case Cmd::kSet:
      if (req.flags != 0) return client_error("client flags not supported (flags must be 0)");
      if (req.exptime != 0) return client_error("expiry not supported (exptime must be 0)");
      return too_large_or_empty(req, max_kv);
    case Cmd::kGet: case Cmd::kGets: case Cmd::kDelete:
      for (const std::string& k : req.keys) {
        if (k.empty() || k.size() > wire::kMaxKeyLen) return client_error("bad command line format");
      }
      return "";
    case Cmd::kMetaGet: case Cmd::kMetaSet: case Cmd::kMetaDelete: {
      const std::string_view bad = refused_meta_flags(req.cmd);
      for (const MetaFlag& f : req.meta.list) {
        if (bad.find(f.letter) != std::string_view::npos)
          return client_error(std::string(req.cmd == Cmd::kMetaGet ? "mg" : req.cmd == Cmd::kMetaSet ? "ms" : "md") +
                              " flag " + f.letter + " not supported");
      }
      if (req.cmd == Cmd::kMetaSet) {
        if (req.flags != 0) return client_error("client flags not supported (F must be 0)");
        if (req.exptime != 0) return client_error("expiry not supported (T must be 0)");
        if (const char m = req.meta.mode(); m != 0 && m != 'S')
          return client_error(std::string("ms mode ") + m + " not supported (only S, set)");
      }
      return too_large_or_empty(req, max_kv);
    }
    default:
      return client_error(std::string(command_name(req.cmd)) + " not supported");
  }
}

void render(const Request& req, std::span<const client::Completion> results, std::string& out, Counters& c) {
  if (results.empty()) return;
  // Classic noreply: the client reads nothing back, errors included (memcached answers nothing
  // to a noreply line it cannot parse either); a reply it does not expect would be read as the
  // answer to its next command. Meta q drops only what quiet_suppresses says.
  std::string dropped;
  std::string& to = req.noreply && !is_meta(req.cmd) ? dropped : out;
  switch (cluster_op(req.cmd)) {
    case wire::kGet: render_get(req, results, to, c); break;
    case wire::kPut: case wire::kDelete: render_write(req, results[0], to, c); break;
    default: break;
  }
}

}  // namespace exo::proxy
