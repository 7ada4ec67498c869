// Which controller instance a cache node asks next (docs/design/replication.md, 5.4): pure, so
// it is tested without a network. A standby refuses rule changes with FAILED_PRECONDITION "not
// the master; the master is <name>": move to that instance. A controller that cannot be reached
// (UNAVAILABLE) or that names no known master: move to the next one in config order.
#pragma once

#include <cctype>
#include <cstddef>
#include <string>
#include <vector>

#include "cluster.h"

namespace exo::cache {

inline constexpr const char kMasterIs[] = "the master is ";

// The index to ask after `current` answered `code`/`message`; `current` itself when the answer
// is no reason to move (success, or a failure another instance would not fix).
inline size_t controller_after(const std::vector<ControllerInstanceInfo>& controllers, size_t current,
                               bool unavailable, bool not_master, const std::string& message) {
  if (controllers.size() < 2 || (!unavailable && !not_master)) return current;
  if (not_master) {
    const size_t at = message.find(kMasterIs);
    if (at != std::string::npos) {
      const std::string rest = message.substr(at + sizeof(kMasterIs) - 1);
      for (size_t i = 0; i < controllers.size(); ++i) {
        const std::string& n = controllers[i].name;
        // the name, then the end of the message or a non-name character
        if (i != current && rest.compare(0, n.size(), n) == 0 &&
            (rest.size() == n.size() || !std::isalnum(static_cast<unsigned char>(rest[n.size()]))))
          return i;
      }
    }
  }
  return (current + 1) % controllers.size();
}

}  // namespace exo::cache
