// Standard base64 (RFC 4648 alphabet, '=' padding) for meta commands' binary keys (b flag).
#pragma once

#include <string>
#include <string_view>

namespace exo::proxy::base64 {

// Appends the encoding of `in` to `out`.
void encode(std::string_view in, std::string& out);

// Decodes `in` into `out` (replacing it). False, `out` unspecified, unless `in` is a non-empty
// whole number of 4-character groups over the alphabet with padding only at its end.
bool decode(std::string_view in, std::string& out);

}  // namespace exo::proxy::base64
