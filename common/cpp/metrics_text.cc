#include "metrics_text.h"

#include <charconv>
#include <cmath>
#include <unordered_map>

namespace exo::metrics {

std::string exposed_name(std::string_view program, const CounterDesc& desc) {
  std::string n = "exo_";
  n += program;
  n += '_';
  n += desc.name;
  if (desc.kind == CounterKind::COUNTER) n += "_total";
  return n;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (const char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_double(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest form that reads back as v
  return std::string(buf, r.ptr);
}

void append_counters(std::string& out, std::string_view program, std::span<const CounterDesc> descs,
                     const NamedValues& values) {
  std::unordered_map<std::string_view, uint64_t> by_name;
  for (const auto& [name, value] : values) by_name.emplace(name, value);
  for (const CounterDesc& d : descs) {
    const auto it = by_name.find(d.name);
    if (it == by_name.end()) continue;
    const std::string name = exposed_name(program, d);
    out += "# HELP " + name + " " + escape_help(d.help) + "\n";
    out += "# TYPE " + name + (d.kind == CounterKind::COUNTER ? " counter\n" : " gauge\n");
    out += name + " " + std::to_string(it->second) + "\n";
  }
}

}  // namespace exo::metrics
