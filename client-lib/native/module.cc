// exoskeleton's native hot path as a Python extension (pybind11): `_exo_native.Pipeline` runs a
// list of requests through pipeline.cc over the Python client's own sockets, with the GIL
// released while it waits on the network. exoskeleton/native.py finds and loads it;
// Client.execute uses it when it can (docs in client-lib/README.md).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <stdexcept>

#include "mmsg_io.h"
#include "pipeline.h"

namespace py = pybind11;
using exo::client::Endpoint;
using exo::client::MmsgIO;
using exo::client::Op;
using exo::client::Options;
using exo::client::Pipeline;

namespace {

uint32_t ipv4(const py::bytes& b, const char* what) {
  const std::string s = b;
  if (s.size() != 4) throw std::invalid_argument(std::string(what) + ": 4 bytes expected");
  return uint32_t(uint8_t(s[0])) << 24 | uint32_t(uint8_t(s[1])) << 16 | uint32_t(uint8_t(s[2])) << 8 | uint8_t(s[3]);
}

// One client's native state: its borrowed sockets and its pipeline.
class NativePipeline {
 public:
  NativePipeline(int tx_fd, int rx_fd, const py::bytes& mac, const py::bytes& ip, int port,
                 const py::bytes& service_ip, int udp_port, uint32_t client_id)
      : io_(tx_fd, rx_fd), pipe_(io_, endpoint(mac, ip, port, service_ip, udp_port), client_id) {}

  // ops: [(op, key, value)]; returns ([(status or None, value, flags, latency_s, attempts)], seq)
  py::tuple execute(const py::list& ops, double timeout_s, int retries, size_t window, uint32_t seq,
                    double busy_budget_s) {
    std::vector<Op> in;
    in.reserve(ops.size());
    for (const auto& o : ops) {
      auto t = o.cast<py::tuple>();
      in.push_back(Op{t[0].cast<uint8_t>(), t[1].cast<std::string>(), t[2].cast<std::string>()});
    }
    std::vector<exo::client::Outcome> out;
    pipe_.seq = seq;
    {
      py::gil_scoped_release nogil;
      Options opt{window, timeout_s, retries};
      opt.busy_budget_s = busy_budget_s;
      out = pipe_.execute(in, opt);
    }
    py::list res(out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const auto& o = out[i];
      res[i] = py::make_tuple(o.status < 0 ? py::object(py::none()) : py::object(py::int_(o.status)),
                              py::bytes(o.value), o.flags, o.latency_s, o.attempts);
    }
    return py::make_tuple(res, pipe_.seq);
  }

  py::dict stats() const {
    const auto& s = pipe_.stats;
    py::dict d;
    d["sent"] = s.sent;
    d["resent"] = s.resent;
    d["replies"] = s.replies;
    d["stray_replies"] = s.stray_replies;
    d["timeouts"] = s.timeouts;
    d["busy_retries"] = s.busy_retries;
    d["send_calls"] = s.send_calls;
    d["recv_calls"] = s.recv_calls;
    return d;
  }

 private:
  static Endpoint endpoint(const py::bytes& mac, const py::bytes& ip, int port, const py::bytes& service_ip,
                           int udp_port) {
    Endpoint ep;
    const std::string m = mac;
    if (m.size() != 6) throw std::invalid_argument("mac: 6 bytes expected");
    std::memcpy(ep.mac.data(), m.data(), 6);
    ep.ip = ipv4(ip, "ip");
    ep.port = static_cast<uint16_t>(port);
    ep.service_ip = ipv4(service_ip, "service_ip");  // checked, then unused (pipeline.h)
    ep.udp_port = static_cast<uint16_t>(udp_port);
    return ep;
  }

  MmsgIO io_;
  Pipeline pipe_;
};

}  // namespace

PYBIND11_MODULE(_exo_native, m) {
  m.doc() = "Exoskeleton client hot path: pipelined requests with sendmmsg/recvmmsg";
  py::class_<NativePipeline>(m, "Pipeline")
      .def(py::init<int, int, const py::bytes&, const py::bytes&, int, const py::bytes&, int, uint32_t>(),
           py::arg("tx_fd"), py::arg("rx_fd"), py::arg("mac"), py::arg("ip"), py::arg("port"),
           py::arg("service_ip"), py::arg("udp_port"), py::arg("client_id"))
      .def("execute", &NativePipeline::execute, py::arg("ops"), py::arg("timeout_s"), py::arg("retries"),
           py::arg("window"), py::arg("seq"), py::arg("busy_budget_s") = exo::client::EngineOptions{}.busy_budget_s)
      .def("stats", &NativePipeline::stats);
  // The engine's BUSY budget default (exo-proxy uses it): tests check that the Python engine's
  // dispatch.BUSY_BUDGET_S is the same number.
  m.attr("BUSY_BUDGET_S") = exo::client::EngineOptions{}.busy_budget_s;
}
