// Send timestamps of the requests in flight, indexed by seq modulo a power-of-two window, shared
// by the TX thread (one writer: on_send, cancel) and the RX thread (one matcher: match). No
// locks: each slot is a tiny seqlock whose tag holds the seq, a valid bit and an answered bit;
// the matcher claims a reply by compare-and-swapping the answered bit in, which fails if the TX
// thread reused the slot meanwhile, so a reply is counted at most once and never paired with
// the wrong send time. A reply arriving after window() newer requests were sent finds its slot
// reused and is late: size the window to rate x (longest wait for a reply) or more.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace exo::loadgen {

class SendRing {
 public:
  enum class Match : uint8_t {
    kAnswered,   // first reply to a request in the window: *send_ns is its send time
    kDuplicate,  // that request was already answered
    kLate,       // the slot was reused by a newer request: sent more than window() ago
    kUnknown,    // no such request was sent (yet): a seq from nowhere
  };

  // window = the smallest power of two >= min_window (and >= 2).
  explicit SendRing(uint64_t min_window);

  uint64_t window() const { return mask_ + 1; }

  // TX thread, before the frame leaves (so a fast reply always finds it).
  void on_send(uint32_t seq, uint64_t send_ns) {
    Slot& s = slots_[seq & mask_];
    s.tag.store(kBusy | seq, std::memory_order_relaxed);  // being rewritten for `seq`
    std::atomic_thread_fence(std::memory_order_release);
    s.send_ns.store(send_ns, std::memory_order_relaxed);
    s.tag.store(kValid | seq, std::memory_order_release);
  }

  // TX thread: the frame could not be sent after all.
  void cancel(uint32_t seq) {
    Slot& s = slots_[seq & mask_];
    uint64_t tag = kValid | seq;
    s.tag.compare_exchange_strong(tag, 0, std::memory_order_relaxed);
  }

  // RX thread.
  Match match(uint32_t seq, uint64_t* send_ns);

 private:
  static constexpr uint64_t kBusy = uint64_t{1} << 34;
  static constexpr uint64_t kValid = uint64_t{1} << 33;
  static constexpr uint64_t kAnsweredBit = uint64_t{1} << 32;

  struct Slot {
    // 0 = empty; kBusy | seq = being rewritten; kValid | [kAnsweredBit] | seq = in flight.
    std::atomic<uint64_t> tag{0};
    std::atomic<uint64_t> send_ns{0};
  };

  uint64_t mask_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace exo::loadgen
