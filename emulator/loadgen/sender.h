// The open-loop TX loop. Requests leave at `rate` per second, paced by a TokenBucket on the
// monotonic clock in batches of `batch` frames (one sendmmsg each), whatever the replies do.
// When ahead of schedule the loop sleeps (clock_nanosleep) until the bucket holds a batch,
// so it never spins a core. Frames are patched copies of prebuilt templates (a RequestWriter:
// RequestBuilder for exo and reflect, MemcachedRequestBuilder for memcached),
// written into buffers allocated once.
//
// Keys: rank ~ Zipf(alpha) over `keys` ranks (alpha 0 = uniform), mapped to a key id by the
// hot-set swap schedule at the batch's time, named key_name(id, key_size). Each request is a
// GET with probability get_ratio, else a PUT.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "loadgen/frame_io.h"
#include "loadgen/hot_set_swap.h"
#include "loadgen/request_builder.h"
#include "loadgen/rng.h"
#include "loadgen/send_ring.h"
#include "loadgen/series.h"
#include "loadgen/zipf.h"

namespace exo::loadgen {

struct SenderConfig {
  double rate = 1000;          // requests per second, > 0
  uint64_t duration_ns = 0;    // send phase length
  unsigned batch = 1;          // frames per sendmmsg, >= 1
  double catch_up_s = 0.01;    // lateness the bucket makes up for (burst = rate x this, >= batch)
  double get_ratio = 1.0;
  uint64_t seed = 1;
  uint64_t keys = 1;
  double alpha = 0.0;
  uint64_t swap_count = 0;     // H; 0 = never swap
  uint64_t swap_every_ns = 0;  // T; 0 = never swap
};

struct TxStats {
  uint64_t sent = 0;
  uint64_t tx_errors = 0;  // frames the sink refused (not sent, not counted in sent)
  uint64_t batches = 0;
  uint64_t sleeps = 0;
  uint64_t send_elapsed_ns = 0;  // from start to the end of the send phase (or the stop)
  std::string first_error;
};

class Sender {
 public:
  // Throws std::invalid_argument for a config the samplers reject.
  Sender(const SenderConfig& cfg, const RequestWriter& builder, FrameSink& sink, SendRing& ring,
         Series& series);

  // Sends from series.start_ns() for duration_ns or until `stop`; calls each_second(t) on
  // this thread once wall second t has ended (t = 0, 1, ...), for progress output.
  TxStats run(const std::atomic<bool>& stop, const std::function<void(uint64_t)>& each_second);

 private:
  void send_batch(unsigned n, uint64_t now, TxStats& st);

  SenderConfig cfg_;
  const RequestWriter& builder_;
  FrameSink& sink_;
  SendRing& ring_;
  Series& series_;
  ZipfSampler zipf_;
  HotSetSwap swap_;
  Xoshiro256ss rng_;
  uint32_t seq_ = 0;
  std::vector<uint8_t> buf_;
  std::vector<iovec> iov_;
  std::vector<mmsghdr> msgs_;
};

}  // namespace exo::loadgen
