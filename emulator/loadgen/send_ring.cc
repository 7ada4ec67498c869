#include "loadgen/send_ring.h"

#include <bit>

namespace exo::loadgen {

SendRing::SendRing(uint64_t min_window) {
  const uint64_t w = std::bit_ceil(min_window < 2 ? uint64_t{2} : min_window);
  mask_ = w - 1;
  slots_ = std::make_unique<Slot[]>(w);
}

SendRing::Match SendRing::match(uint32_t seq, uint64_t* send_ns) {
  Slot& s = slots_[seq & mask_];
  uint64_t tag = s.tag.load(std::memory_order_acquire);
  for (;;) {
    if (tag == 0) return Match::kUnknown;
    const auto held = static_cast<uint32_t>(tag);  // (also while busy: a newer seq's slot)
    if (held != seq) {
      // Serial-number order (RFC 1982): a newer seq in the slot means ours was overwritten.
      return static_cast<int32_t>(held - seq) > 0 ? Match::kLate : Match::kUnknown;
    }
    if (!(tag & kValid)) return Match::kUnknown;  // our seq, still being booked: not sent yet
    if (tag & kAnsweredBit) return Match::kDuplicate;
    const uint64_t t = s.send_ns.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    // Succeeds only if the tag never changed since it was read: then t is this request's time.
    if (s.tag.compare_exchange_weak(tag, tag | kAnsweredBit, std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      *send_ns = t;
      return Match::kAnswered;
    }
    // tag now holds the current value: reused (late), or a spurious failure: look again.
  }
}

}  // namespace exo::loadgen
