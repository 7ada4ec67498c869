// The run's output: one JSON document {"params", "seconds", "totals"} (format in
// emulator/README.md), written atomically, and the one-line progress and summary on stderr.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "loadgen/reply_handler.h"
#include "loadgen/sender.h"
#include "loadgen/series.h"

namespace exo::loadgen {

// params: params_json(); tx/rx: the finished threads' counters; interrupted: stopped by a signal.
nlohmann::json make_report(const nlohmann::json& params, const Series& series, const TxStats& tx,
                           const RxCounters& rx, bool interrupted, const std::string& rx_error);

// Writes text to path via path.tmp.<pid> + fsync + rename. Returns "" or the error.
std::string write_file_atomic(const std::string& path, const std::string& text);

// "t=12s sent=1200000 answered=1199000 loss=0.08%" (loss so far, including requests in flight).
std::string progress_line(uint64_t t, uint64_t sent, uint64_t answered);

}  // namespace exo::loadgen
