// The RX thread's loop: read frames in batches (recvmmsg behind FrameSource), stamp each batch
// with one clock read, hand every frame to the ReplyHandler, until told to stop.
#pragma once

#include <atomic>
#include <string>

#include "loadgen/frame_io.h"
#include "loadgen/reply_handler.h"

namespace exo::loadgen {

struct ReceiverOptions {
  unsigned batch = 64;      // frames per recvmmsg
  size_t frame_cap = 2048;  // bytes per receive buffer: >= 14 + mtu
  int poll_ms = 20;         // how often a quiet receiver looks at the stop flag
};

// Runs until `stop` is set. Receive errors are counted in handler.counters().errors; the
// first one's text goes to *first_error (read it after the thread has been joined).
void run_receiver(FrameSource& source, ReplyHandler& handler, const ReceiverOptions& opts,
                  const std::atomic<bool>& stop, std::string* first_error);

}  // namespace exo::loadgen
