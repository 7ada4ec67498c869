// libFuzzer target: the /metrics listener's request classification (metrics_http.h) on arbitrary
// bytes, fed as the listener reads them (in pieces), must never read out of bounds, must say
// kMetrics only for a complete, well-formed GET of /metrics within the size bound, and must
// settle (not ask for more) once the bound is reached.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "metrics_http.h"

using exo::metrics::Route;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the piece size, the rest is what the peer sends.
  const size_t piece = 1 + data[0] % 64;
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string head;  // grows like the listener's buffer, in an exactly-sized heap copy each step
  Route r = Route::kIncomplete;
  for (size_t pos = 0; pos < input.size() && r == Route::kIncomplete; pos += piece) {
    head.append(input.substr(pos, piece));
    const std::string exact(head);
    r = exo::metrics::route_request(exact);
    if (exact.size() >= exo::metrics::kMaxRequestBytes && r == Route::kIncomplete) std::abort();
  }
  if (r == Route::kMetrics) {
    const size_t end = head.find("\r\n\r\n");
    if (head.rfind("GET /metrics", 0) != 0 || end == std::string::npos ||
        end + 4 > exo::metrics::kMaxRequestBytes)
      std::abort();
    const char after = head[12];
    if (after != ' ' && after != '?') std::abort();
  }
  return 0;
}
