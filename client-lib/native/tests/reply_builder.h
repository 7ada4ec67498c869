// Test helper: the UDP payload a node answers a request with (Exoskeleton header + key + value),
// as wire::build_reply lays it out. Shared by the native client's tests and exo-proxy's
// end-to-end test (proxy/tests/event_loop_test.cc), whose fake clusters all answer this way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "wire.h"

namespace exo::client::testing {

// client_id 0: the request's own.
inline std::vector<uint8_t> reply_payload(const wire::FrameView& req, uint8_t status, std::string_view value = {},
                                          uint8_t flags = 0, uint32_t client_id = 0) {
  std::vector<uint8_t> p(wire::kHdrLen + req.key.size() + value.size());
  auto* h = reinterpret_cast<wire::ExoHeader*>(p.data());
  h->magic.set(wire::kMagic);
  h->version = wire::kVersion;
  h->opcode = req.opcode | wire::kReplyBit;
  h->status = status;
  h->flags = flags;
  h->key_len.set(static_cast<uint16_t>(req.key.size()));
  h->value_len.set(static_cast<uint32_t>(value.size()));
  h->client_id.set(client_id ? client_id : req.client_id);
  h->seq.set(req.seq);
  std::copy(req.key.begin(), req.key.end(), p.begin() + wire::kHdrLen);
  std::copy(value.begin(), value.end(), p.begin() + wire::kHdrLen + req.key.size());
  return p;
}

}  // namespace exo::client::testing
