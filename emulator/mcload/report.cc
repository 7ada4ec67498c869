#include "mcload/report.h"

#include "loadgen/report.h"

namespace exo::mcload {

nlohmann::json make_report(const nlohmann::json& params, const loadgen::Series& series, const DriverStats& st,
                           const ProcessCpu& cpu, bool interrupted) {
  loadgen::TxStats tx;
  tx.sent = st.sent;
  tx.send_elapsed_ns = st.send_elapsed_ns;
  const loadgen::RxCounters no_frames;
  nlohmann::json doc = loadgen::make_report(params, series, tx, no_frames, interrupted, "");
  nlohmann::json& t = doc["totals"];
  for (const char* k : {"from_cache", "from_cache_share", "tx_errors", "tx_batches", "tx_sleeps", "rx_frames",
                        "rx_foreign", "rx_malformed", "rx_duplicates", "rx_late", "rx_unknown", "rx_other",
                        "rx_errors"})
    t.erase(k);
  const double answered = static_cast<double>(st.answered);
  const auto per_request = [&](uint64_t n) { return answered > 0 ? static_cast<double>(n) / answered : 0.0; };
  t.update({
      {"written", st.written},
      {"hits", st.hits},
      {"misses", st.misses},
      {"error_replies", st.error_replies},
      {"wrong_key", st.wrong_key},
      {"wrong_value_size", st.wrong_value_size},
      {"malformed", st.malformed},
      {"timeouts", st.timeouts},
      {"expired", st.expired},
      {"unwritten", st.unwritten},
      {"lost_on_dropped", st.lost_on_dropped},
      {"backlog_max", st.backlog_max},
      {"connections", st.connections},
      {"connections_open_at_end", st.connections_open_at_end},
      {"conns_closed_by_peer", st.conns_closed_by_peer},
      {"conns_failed", st.conns_failed},
      {"writes", st.writes},
      {"reads", st.reads},
      {"wakeups", st.wakeups},
      {"syscalls_per_request", per_request(st.writes + st.reads + st.wakeups)},
      {"drain_elapsed_s", static_cast<double>(st.drain_elapsed_ns) / 1e9},
      {"cpu_user_s", cpu.user_s},
      {"cpu_sys_s", cpu.sys_s},
  });
  if (!st.first_error.empty()) t["first_error"] = st.first_error;
  if (!st.first_error_reply.empty()) t["first_error_reply"] = st.first_error_reply;
  return doc;
}

}  // namespace exo::mcload
