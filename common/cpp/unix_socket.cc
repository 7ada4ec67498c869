#include "unix_socket.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace exo {

std::string prepare_unix_socket(const std::string& address) {
  for (const char* prefix : {"unix://", "unix:"}) {
    if (address.rfind(prefix, 0) != 0) continue;
    const std::string path = address.substr(std::strlen(prefix));
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) return "'" + path + "' exists and is not a socket";
      if (unlink(path.c_str()) != 0)
        return "cannot remove stale socket '" + path + "': " + std::strerror(errno);
    }
    std::error_code ec;
    const auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    return "";
  }
  return "";
}

}  // namespace exo
