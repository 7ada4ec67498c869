// Shared fixtures of the exo-loadgen tests: a client endpoint, and replies built the way a node
// builds them (wire::build_reply on the parsed request).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "loadgen/request_builder.h"
#include "wire.h"

namespace exo::loadgen::testing {

inline Endpoint test_endpoint(uint16_t src_port = 40000) {
  Endpoint ep;
  ep.mac = {0x02, 0x00, 0x00, 0x00, 0x03, 0x01};
  ep.ip = 0x0a000301;  // 10.0.3.1
  ep.src_port = src_port;
  ep.service_ip = 0x0a0000fe;  // 10.0.0.254
  ep.udp_port = 7777;
  return ep;
}

inline const uint8_t* node_mac() {
  static const uint8_t mac[6] = {0x02, 0x00, 0x00, 0x00, 0x02, 0x01};
  return mac;
}

// The reply a node would send to `request` (value: a few bytes for a GET).
inline std::vector<uint8_t> reply_to(std::span<const uint8_t> request, uint8_t status = wire::kOk,
                                     uint8_t flags = 0) {
  wire::FrameView req{};
  EXPECT_EQ(wire::parse(request, req), wire::ParseError::kNone);
  std::vector<uint8_t> out(2048);
  const wire::Addr self{node_mac(), 0x0a000201, 7777};
  static const uint8_t value[] = {'h', 'e', 'l', 'l', 'o'};
  const bool has_value = req.op() == wire::kGet && status == wire::kOk;
  out.resize(wire::build_reply(out, req, self, status, flags,
                               has_value ? std::span<const uint8_t>(value) : std::span<const uint8_t>()));
  return out;
}

// A request from `builder` for key id `key`, then the node's reply to it.
inline std::vector<uint8_t> reply_for(const RequestBuilder& builder, uint32_t seq,
                                      uint8_t status = wire::kOk, uint8_t flags = 0,
                                      bool put = false, uint64_t key = 42) {
  std::vector<uint8_t> req(builder.frame_len(put));
  builder.write(req.data(), put, key, seq);
  return reply_to(req, status, flags);
}

}  // namespace exo::loadgen::testing
