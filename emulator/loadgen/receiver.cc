#include "loadgen/receiver.h"

#include <cstring>

#include "loadgen/clock.h"

namespace exo::loadgen {

void run_receiver(FrameSource& source, ReplyHandler& handler, const ReceiverOptions& opts,
                  const std::atomic<bool>& stop, std::string* first_error) {
  RxBatch batch(opts.batch, opts.frame_cap);
  RxCounters& c = handler.counters();
  while (!stop.load(std::memory_order_relaxed)) {
    const int n = source.recv(batch, opts.poll_ms);
    if (n < 0) {
      if (c.errors.load(std::memory_order_relaxed) == 0 && first_error != nullptr)
        *first_error = std::string("receive: ") + std::strerror(-n);
      c.errors.store(c.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      sleep_until_ns(mono_ns() + 10'000'000);  // a broken socket must not spin the core
      continue;
    }
    const uint64_t now = mono_ns();
    for (int i = 0; i < n; ++i) handler.handle(batch.frame(static_cast<unsigned>(i)), now);
  }
}

}  // namespace exo::loadgen
