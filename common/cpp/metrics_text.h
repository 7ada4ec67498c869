// Prometheus text exposition (format 0.0.4) of a program's counters, generated from the counter
// lists of counter_list.h: a COUNTER `hits` of program `cache` is exposed as
// `exo_cache_hits_total`, a GAUGE `entries` as `exo_cache_entries`, each with the list's help
// text as HELP. Pure string building: no sockets, no clocks (metrics_http.h serves it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "counter_list.h"

namespace exo::metrics {

// (name, value) pairs as a Stats reply lists them (cache-node/src/counters.h flatten, ...).
using NamedValues = std::vector<std::pair<std::string, uint64_t>>;

// "exo_<program>_<name>_total" for a COUNTER, "exo_<program>_<name>" for a GAUGE.
std::string exposed_name(std::string_view program, const CounterDesc& desc);

// HELP text with `\` and newline escaped as the format requires.
std::string escape_help(std::string_view help);
// A label value with `\`, `"` and newline escaped.
std::string escape_label_value(std::string_view value);
// A float as the format writes it: shortest round-trip form, "+Inf", "-Inf" or "NaN".
std::string format_double(double v);

// Appends one HELP/TYPE/sample block per entry of `descs` that has a value in `values` (matched
// by name; a declared counter without a value is left out, a value without a declaration is
// never exposed: only the list names what is exposed).
void append_counters(std::string& out, std::string_view program, std::span<const CounterDesc> descs,
                     const NamedValues& values);

}  // namespace exo::metrics
