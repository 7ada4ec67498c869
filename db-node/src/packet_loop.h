// The per-thread receive/handle/reply loop (run-to-completion, thesis 3.8).
#pragma once

#include <atomic>

#include "request_handler.h"

namespace exo::db {

// Runs until `quit` is set (checked at least every SO_RCVTIMEO). Owns nothing: the caller
// closes `fd` after the thread has been joined.
void run_packet_loop(int fd, RequestHandler& handler, Counters& counters,
                     const std::atomic<bool>& quit);

}  // namespace exo::db
