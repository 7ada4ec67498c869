// One memcached client connection of exo-proxy, without its socket: bytes in (on_input), cluster
// ops out (SessionHost::submit), their completions in (complete), reply bytes out (output).
//
// Replies leave in request order whatever order the cluster answers in: every request takes a
// slot, filled when its last cluster op completes (a get of n keys is n GETs), and only the
// finished slots at the front are flushed. A request answered at once (an error, version) takes
// a slot too when earlier ones are still waiting.
//
// Bounds, so one client cannot eat the proxy: at most max_pending requests waiting per
// connection (then it stops parsing and the event loop stops reading it: TCP pushes back);
// unsent output over max_output means a client that does not read its replies: the event loop
// closes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "outcomes.h"
#include "request_engine.h"
#include "text_protocol.h"
#include "wire.h"

namespace exo::proxy {

struct SessionConfig {
  Limits limits;                            // the parser's; max_value from the cluster MTU
  size_t max_kv = wire::max_kv_bytes(1500);  // key + value of one frame
  size_t max_pending = 256;                 // requests in progress before parsing pauses
  size_t max_output = 8u << 20;             // unsent reply bytes before the connection is closed
};

// The session's view of the proxy: the cluster, and the proxy-wide `stats`.
class SessionHost {
 public:
  virtual ~SessionHost() = default;
  // Queues a cluster op; its completion comes back later through Session::complete, never from
  // inside submit().
  virtual void submit(uint8_t op, std::string_view key, std::string_view value, uint64_t tag) = 0;
  virtual void append_stats(std::string& out) = 0;  // STAT lines, without END
};

class Session {
 public:
  Session(uint32_t id, const SessionConfig& cfg, SessionHost& host, Counters& counters);

  // Bytes read from the connection.
  void on_input(std::string_view bytes);
  // The client sent its last byte: answer every complete request it sent, then finish.
  void on_eof();
  // A cluster op this session submitted has completed (tag as submitted).
  void complete(client::Completion c);

  // Reply bytes ready to write, in request order; consume_output(n) after writing n of them.
  std::string_view output() const { return std::string_view(out_).substr(out_off_); }
  void consume_output(size_t n);

  // Should the event loop read more? False while max_pending requests wait, and once closing.
  bool wants_input() const { return !closing_ && !eof_ && slots_.size() < cfg_.max_pending; }
  // Unsent output over max_output: close now (the event loop checks after writing).
  bool overflowed() const { return output().size() > cfg_.max_output; }
  // Close now: quit or a fatal protocol error, and every earlier reply written; or overflowed.
  bool finished() const { return overflowed() || (closing_ && slots_.empty() && output().empty()); }

  uint32_t id() const { return id_; }
  size_t pending() const { return slots_.size(); }
  // Which session a submitted tag belongs to.
  static uint32_t session_of(uint64_t tag) { return static_cast<uint32_t>(tag >> 32); }

 private:
  struct Slot {
    Request req;                              // keys (and meta flags) for the reply
    std::vector<client::Completion> results;  // one per cluster op, in key order
    std::vector<bool> got;
    size_t outstanding = 0;
    std::string reply;  // once outstanding == 0
    bool stats = false;  // `stats`: rendered when flushed
  };

  void parse();
  void start(Request&& req);
  void answer(std::string_view text);  // a reply known now, kept in order
  void flush();                        // finished slots at the front -> out_
  uint64_t tag(uint32_t slot_seq, size_t key_index) const;

  uint32_t id_;
  SessionConfig cfg_;
  SessionHost& host_;
  Counters& counters_;
  Parser parser_;
  std::string in_;
  std::string out_;
  size_t out_off_ = 0;
  std::deque<Slot> slots_;
  uint32_t front_seq_ = 0;  // slot seq of slots_.front(); the next slot is front_seq_ + size
  bool closing_ = false;  // nothing more is parsed; finish once every reply is written
  bool eof_ = false;      // nothing more arrives; parse what is buffered, then close
  bool parsing_ = false;
};

}  // namespace exo::proxy
