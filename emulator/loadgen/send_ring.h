// Send timestamps of the requests in flight, indexed by seq modulo a power-of-two window, shared
// by the TX thread (one writer: on_send, cancel) and the RX thread (one matcher: match). No
// locks: each slot is a tiny seqlock whose tag holds the seq, a valid bit and an answered bit;
// the matcher claims a reply by compare-and-swapping the answered bit in, which fails if the TX
// thread reused the slot meanwhile, so a reply is counted at most once and never paired with
// the wrong send time. A reply arriving after window() newer requests were sent finds its slot
// reused and is late: size the window to rate x (longest wait for a reply) or more.
// The ring also remembers the newest seq booked and how many were booked in all, for a protocol
// whose replies echo only part of the seq (memcached's 16-bit request id: memcached_udp.h).
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

  // TX thread, before the frame leaves (so a fast reply always finds it). Seqs are booked in
  // order, each one after the one before (newest() relies on it).
  void on_send(uint32_t seq, uint64_t send_ns) {
    Slot& s = slots_[seq & mask_];
    s.tag.store(kBusy | seq, std::memory_order_relaxed);  // being rewritten for `seq`
    std::atomic_thread_fence(std::memory_order_release);
    s.send_ns.store(send_ns, std::memory_order_relaxed);
    s.tag.store(kValid | seq, std::memory_order_release);
    booked_.store(booked_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    newest_.store(kValid | seq, std::memory_order_release);  // after booked_: see newest()
  }

  // TX thread: the frame could not be sent after all.
  void cancel(uint32_t seq) {
    Slot& s = slots_[seq & mask_];
    uint64_t tag = kValid | seq;
    s.tag.compare_exchange_strong(tag, 0, std::memory_order_relaxed);
  }

  // RX thread.
  Match match(uint32_t seq, uint64_t* send_ns);

  // RX thread: the newest seq booked and how many seqs were booked in all (at least as many as
  // up to that newest one); false before the first on_send.
  bool newest(uint32_t* seq, uint64_t* booked) const {
    const uint64_t n = newest_.load(std::memory_order_acquire);
    if (!(n & kValid)) return false;
    *seq = static_cast<uint32_t>(n);
    *booked = booked_.load(std::memory_order_relaxed);
    return true;
  }

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
  std::atomic<uint64_t> newest_{0};  // kValid | the newest seq booked; 0 = none yet
  std::atomic<uint64_t> booked_{0};  // on_send calls so far (TX thread's only writer)
};

}  // namespace exo::loadgen
