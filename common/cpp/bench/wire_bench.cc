// Not a test: what verifying checksums costs per received frame (docs/wire-format.md,
// "Checksums on the hot path"). Prints, per frame kind, ns per call of wire::parse() (which
// verifies the IPv4 header checksum and a non-zero UDP checksum), of wire::screen() (the
// nodes' pre-filter around it), and of the two checksum checks alone, as JSON lines:
//   build/common/cpp/wire_bench [--iters N] [--only FRAME] [--udp 0|1]
// Each figure is the median of 7 runs of N calls (default 2,000,000) over the same frame,
// i.e. warm caches: the cost of the arithmetic, not of bringing the frame in from memory.
// Times vary with the machine's load; instruction counts do not:
//   valgrind --tool=callgrind build/common/cpp/wire_bench --iters 10000 --only get_key16 --udp 1
// and callgrind_annotate --inclusive=yes: a function's cost / its calls (7 x N each).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "keyhash.h"
#include "wire.h"

namespace {

namespace wire = exo::wire;

std::vector<uint8_t> frame(uint8_t op, size_t key_len, size_t value_len, bool udp_checksum) {
  const std::string key(key_len, 'k');
  const std::vector<uint8_t> value(value_len, 'v');
  const auto* k = reinterpret_cast<const uint8_t*>(key.data());
  const uint64_t hash = exo::key_hash({k, key.size()});
  const exo::Mac dst = exo::request_mac(op == wire::kGet ? exo::kPrefixGet : exo::kPrefixOther, hash);
  const exo::Mac src{0x02, 0, 0, 0, 3, 1};
  wire::Header h;
  h.opcode = op;
  h.client_id = 1;
  h.seq = 2;
  std::vector<uint8_t> f(wire::kMinFrame + key_len + value_len);
  wire::build(f, dst.data(), {src.data(), 0x0a000301, 40000}, exo::request_ip(hash), 7777, h,
              {k, key.size()}, value);
  if (udp_checksum) wire::set_udp_checksum(f);
  return f;
}

volatile uint64_t g_sink;

template <typename Fn>
double ns_per_call(size_t iters, Fn&& fn) {
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    uint64_t acc = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < iters; ++i) acc += fn();
    const auto t1 = std::chrono::steady_clock::now();
    g_sink = acc;
    runs.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / double(iters));
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t iters = 2'000'000;
  std::string only;
  int udp_only = -1;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
    if (std::strcmp(argv[i], "--udp") == 0) udp_only = std::atoi(argv[i + 1]);
  }
  struct Kind {
    const char* name;
    uint8_t op;
    size_t key_len, value_len;
  };
  // A cache node sees GETs only (at most 62 + 250 bytes); a db node also PUTs up to 14 + mtu.
  const Kind kinds[] = {{"get_key16", wire::kGet, 16, 0},
                        {"get_key250", wire::kGet, 250, 0},
                        {"put_key16_value1436", wire::kPut, 16, 1436}};
  wire::ScreenPolicy policy;
  policy.max_frame = 14 + 1500;
  for (const Kind& k : kinds) {
    if (!only.empty() && only != k.name) continue;
    for (bool udp : {false, true}) {
      if (udp_only >= 0 && udp != (udp_only == 1)) continue;
      const std::vector<uint8_t> f = frame(k.op, k.key_len, k.value_len, udp);
      wire::FrameView v{};
      if (wire::parse(f, v) != wire::ParseError::kNone) return 1;
      const double parse_ns = ns_per_call(iters, [&] {
        wire::FrameView fv;
        return static_cast<uint64_t>(wire::parse(f, fv)) + fv.key.size();
      });
      const double screen_ns = ns_per_call(iters, [&] {
        wire::FrameView fv;
        return static_cast<uint64_t>(wire::screen(f, policy, fv));
      });
      const double ip_ns =
          ns_per_call(iters, [&] { return uint64_t{wire::ipv4_checksum_ok(f.data() + wire::off::kIp)}; });
      const double udp_ns = ns_per_call(iters, [&] { return uint64_t{wire::udp_checksum_ok(f.data())}; });
      std::printf(
          "{\"frame\": \"%s\", \"bytes\": %zu, \"udp_checksum\": %s, \"parse_ns\": %.1f, "
          "\"screen_ns\": %.1f, \"ipv4_checksum_check_ns\": %.1f, \"udp_checksum_check_ns\": %.1f}\n",
          k.name, f.size(), udp ? "true" : "false", parse_ns, screen_ns, ip_ns, udp_ns);
    }
  }
  return 0;
}
