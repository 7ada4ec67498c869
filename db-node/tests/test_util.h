// Shared helpers for the db node tests: temp dirs, an in-code cluster, frame builders, fakes.
#pragma once

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster.h"
#include "propagator.h"
#include "store.h"
#include "wire.h"

namespace exo::db::testing {

inline std::span<const uint8_t> B(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/exodb_testXXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// db0 owns slot 0 (hash top bit 0) and db1 slot 1; one cache node "cache0".
inline Cluster test_cluster() {
  Cluster c;
  c.mtu = 1500;
  c.udp_port = 7777;
  c.service_ip = 0x0a0000fe;
  c.partition_bits = 1;
  CacheNodeInfo cache;
  cache.name = "cache0";
  cache.mac = {0x02, 0, 0, 0, 1, 1};
  cache.ip = 0x0a000101;
  cache.grpc = "unix:/nonexistent/exodb-cache0.sock";
  c.cache_nodes.push_back(cache);
  for (int i = 0; i < 2; ++i) {
    DbNodeInfo d;
    d.name = "db" + std::to_string(i);
    d.mac = {0x02, 0, 0, 0, 2, static_cast<uint8_t>(i + 1)};
    d.ip = 0x0a000201 + i;
    d.iface = d.name + "-eth0";
    d.cache_node = "cache0";
    c.db_nodes.push_back(d);
  }
  c.slot_owner = {0, 1};
  return c;
}

// A key whose hash lands in the slot of db node `owner` (0 or 1).
inline std::string key_owned_by(const Cluster& c, uint32_t owner, const std::string& stem = "k") {
  for (int i = 0;; ++i) {
    std::string k = stem + std::to_string(i);
    if (c.owner_index(key_hash(B(k))) == owner) return k;
  }
}

inline const Mac kClientMac = {0x02, 0, 0, 0, 3, 1};
inline constexpr uint32_t kClientIp = 0x0a000301;
inline constexpr uint16_t kClientPort = 40001;

inline std::vector<uint8_t> request(uint8_t op, const std::string& key, const std::string& value = "",
                                    uint32_t seq = 1, uint8_t flags = 0, uint16_t port = 7777,
                                    uint8_t prefix = 0) {
  if (!prefix) prefix = op == wire::kGet ? kPrefixGet : kPrefixOther;
  const Mac dst = request_mac(prefix, key_hash(B(key)));
  std::vector<uint8_t> f(wire::kMinFrame + key.size() + value.size());
  wire::Header h;
  h.opcode = op;
  h.flags = flags;
  h.client_id = 0xC0FFEE;
  h.seq = seq;
  const size_t n = wire::build(f, dst.data(), wire::Addr{kClientMac.data(), kClientIp, kClientPort},
                               0x0a0000fe, port, h, B(key), B(value));
  f.resize(n);
  return f;
}

// Records every store and propagation step in one shared log, so tests can assert ordering.
class EventLog {
 public:
  void add(const std::string& e) {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(e);
  }
  std::vector<std::string> events() const {
    std::lock_guard<std::mutex> lk(mu_);
    return events_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> events_;
};

class FakeStore : public KvStore {
 public:
  explicit FakeStore(EventLog* log = nullptr) : log_(log) {}
  bool fail_get = false, fail_put = false, fail_del = false;
  std::map<std::string, std::string> data;

  StoreResult get(Bytes key, std::string* value) override {
    std::lock_guard<std::mutex> lk(mu_);
    value->clear();
    if (fail_get) return StoreResult::Error("injected get failure");
    auto it = data.find(str(key));
    if (it == data.end()) return StoreResult::NotFound();
    *value = it->second;
    return StoreResult::Ok();
  }
  StoreResult put(Bytes key, Bytes value) override {
    std::lock_guard<std::mutex> lk(mu_);
    record("put " + str(key) + "=" + str(value) + (fail_put ? " FAIL" : ""));
    if (fail_put) return StoreResult::Error("injected put failure");
    data[str(key)] = str(value);
    return StoreResult::Ok();
  }
  StoreResult del(Bytes key) override {
    std::lock_guard<std::mutex> lk(mu_);
    record("del " + str(key) + (fail_del ? " FAIL" : ""));
    if (fail_del) return StoreResult::Error("injected delete failure");
    data.erase(str(key));
    return StoreResult::Ok();
  }

 private:
  static std::string str(Bytes b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }
  void record(const std::string& e) {
    if (log_) log_->add(e);
  }
  std::mutex mu_;
  EventLog* log_;
};

class FakePropagator : public Propagator {
 public:
  explicit FakePropagator(EventLog* log) : log_(log) {}
  PrepareOutcome::Code prepare_result = PrepareOutcome::kPrepared;
  bool commit_ok = true, abort_ok = true;
  std::vector<uint64_t> txids;
  // For the concurrency test: how many propagations of one key overlapped at most.
  std::chrono::microseconds prepare_delay{0};
  std::atomic<int> in_flight{0}, max_in_flight{0};

  PrepareOutcome prepare(const std::string& node, std::span<const uint8_t> key, uint64_t txid,
                         bool is_delete, std::span<const uint8_t> value) override {
    const int now = ++in_flight;
    int prev = max_in_flight.load();
    while (now > prev && !max_in_flight.compare_exchange_weak(prev, now)) {
    }
    if (prepare_delay.count()) std::this_thread::sleep_for(prepare_delay);
    {
      std::lock_guard<std::mutex> lk(mu_);
      record("prepare " + node + " " + str(key) + (is_delete ? " delete" : " put=" + str(value)));
      txids.push_back(txid);
    }
    PrepareOutcome o;
    o.code = prepare_result;
    if (o.code == PrepareOutcome::kFailed) o.error = "injected";
    if (o.code != PrepareOutcome::kPrepared) --in_flight;  // no commit/abort follows
    return o;
  }
  bool commit(const std::string& node, std::span<const uint8_t> key, uint64_t, std::string* e) override {
    --in_flight;
    std::lock_guard<std::mutex> lk(mu_);
    record("commit " + node + " " + str(key));
    if (!commit_ok) *e = "injected";
    return commit_ok;
  }
  bool abort(const std::string& node, std::span<const uint8_t> key, uint64_t, std::string* e) override {
    --in_flight;
    std::lock_guard<std::mutex> lk(mu_);
    record("abort " + node + " " + str(key));
    if (!abort_ok) *e = "injected";
    return abort_ok;
  }

 private:
  static std::string str(std::span<const uint8_t> b) {
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void record(const std::string& e) {
    if (log_) log_->add(e);
  }
  std::mutex mu_;
  EventLog* log_;
};

}  // namespace exo::db::testing
