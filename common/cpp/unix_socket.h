// gRPC cannot bind a unix socket over a file left by a crashed run. Both node kinds prepare
// their control-plane address with this before they start their server.
#pragma once

#include <string>

namespace exo {

// For "unix:PATH" or "unix://PATH": create PATH's directory and remove a stale socket file.
// Anything else at PATH is never removed. Returns "" on success (and for non-unix addresses),
// else a message naming the path.
std::string prepare_unix_socket(const std::string& address);

}  // namespace exo
