// exo-mcload's connections: n stream sockets to the target (TCP with TCP_NODELAY, or a unix
// socket), connected one after another within one overall timeout, then non-blocking.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mcload/options.h"

namespace exo::mcload {

// On success *fds holds n connected, non-blocking, close-on-exec descriptors. On failure every
// descriptor opened so far is closed and *error names the target, which connection failed
// and why ("connection 3 of 64 to 127.0.0.1:11211: Connection refused").
bool connect_all(const Target& t, uint32_t n, uint32_t timeout_ms, std::vector<int>* fds, std::string* error);

}  // namespace exo::mcload
