#include "loadgen/report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace exo::loadgen {
namespace {

using json = nlohmann::json;

json opt_us(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json us_or_null(const LogHistogram& h, double q) {
  if (h.count() == 0) return nullptr;
  return std::round(h.percentile(q) / 100.0) / 10.0;
}

double ratio(uint64_t a, uint64_t b) { return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b); }

uint64_t get(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }

}  // namespace

json make_report(const json& params, const Series& series, const TxStats& tx, const RxCounters& rx,
                 bool interrupted, const std::string& rx_error) {
  json seconds = json::array();
  uint64_t sent = 0, answered = 0, from_cache = 0, not_found = 0, errors = 0;
  for (const SecondRow& r : series.rows()) {
    seconds.push_back({{"t", r.t}, {"sent", r.sent}, {"answered", r.answered}, {"lost", r.lost},
                       {"from_cache", r.from_cache}, {"not_found", r.not_found},
                       {"errors", r.errors}, {"p50_us", opt_us(r.p50_us)},
                       {"p90_us", opt_us(r.p90_us)}, {"p99_us", opt_us(r.p99_us)},
                       {"p999_us", opt_us(r.p999_us)}, {"rx", r.rx}});
    sent += r.sent;
    answered += r.answered;
    from_cache += r.from_cache;
    not_found += r.not_found;
    errors += r.errors;
  }
  const LogHistogram all = series.overall();
  const double elapsed_s = static_cast<double>(tx.send_elapsed_ns) / 1e9;
  const uint64_t lost = sent > answered ? sent - answered : 0;
  json totals = {
      {"sent", sent},
      {"answered", answered},
      {"lost", lost},
      {"loss", ratio(lost, sent)},
      {"from_cache", from_cache},
      {"from_cache_share", ratio(from_cache, answered)},
      {"not_found", not_found},
      {"errors", errors},
      {"send_elapsed_s", elapsed_s},
      {"offered_rps", elapsed_s > 0 ? static_cast<double>(sent) / elapsed_s : 0.0},
      {"answered_rps", elapsed_s > 0 ? static_cast<double>(answered) / elapsed_s : 0.0},
      {"p50_us", us_or_null(all, 0.5)},
      {"p90_us", us_or_null(all, 0.9)},
      {"p99_us", us_or_null(all, 0.99)},
      {"p999_us", us_or_null(all, 0.999)},
      {"max_us", all.count() ? json(std::round(static_cast<double>(all.max()) / 100.0) / 10.0) : json(nullptr)},
      {"tx_errors", tx.tx_errors},
      {"tx_batches", tx.batches},
      {"tx_sleeps", tx.sleeps},
      {"rx_frames", get(rx.frames)},
      {"rx_foreign", get(rx.foreign)},
      {"rx_malformed", get(rx.malformed)},
      {"rx_duplicates", get(rx.duplicates)},
      {"rx_late", get(rx.late)},
      {"rx_unknown", get(rx.unknown)},
      {"rx_other", get(rx.other)},
      {"rx_errors", get(rx.errors)},
      {"interrupted", interrupted},
  };
  if (!tx.first_error.empty()) totals["tx_first_error"] = tx.first_error;
  if (!rx_error.empty()) totals["rx_first_error"] = rx_error;
  return {{"params", params}, {"seconds", std::move(seconds)}, {"totals", std::move(totals)}};
}

std::string write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "--out: cannot create " + tmp + ": " + std::strerror(errno);
  const auto fail = [&](const char* what) {
    std::string e = std::string("--out: ") + what + " " + tmp + ": " + std::strerror(errno);
    close(fd);
    unlink(tmp.c_str());
    return e;
  };
  for (size_t done = 0; done < text.size();) {
    const ssize_t w = write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return fail("cannot write");
    done += static_cast<size_t>(w);
  }
  if (fsync(fd) != 0) return fail("cannot fsync");
  if (close(fd) != 0) {
    const std::string e = "--out: cannot close " + tmp + ": " + std::strerror(errno);
    unlink(tmp.c_str());
    return e;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string e = "--out: cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    unlink(tmp.c_str());
    return e;
  }
  return "";
}

std::string progress_line(uint64_t t, uint64_t sent, uint64_t answered) {
  const double loss = sent == 0 ? 0.0 : 100.0 * (1.0 - ratio(answered, sent));
  char buf[160];
  std::snprintf(buf, sizeof buf, "t=%llus sent=%llu answered=%llu loss=%.2f%%",
                static_cast<unsigned long long>(t), static_cast<unsigned long long>(sent),
                static_cast<unsigned long long>(answered), loss < 0 ? 0.0 : loss);
  return buf;
}

}  // namespace exo::loadgen
