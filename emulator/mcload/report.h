// exo-mcload's JSON: exo-loadgen's document ({"params", "seconds", "totals"}, loadgen/report.h)
// so the bench's run_of reads both alike, with the totals that mean nothing over TCP removed
// (the raw-frame counters rx_*, tx_batches, tx_sleeps, from_cache) and the TCP ones added.
#pragma once

#include <nlohmann/json.hpp>

#include "loadgen/series.h"
#include "mcload/driver.h"

namespace exo::mcload {

struct ProcessCpu {
  double user_s = 0, sys_s = 0;  // getrusage(RUSAGE_SELF) at the end of the run
};

nlohmann::json make_report(const nlohmann::json& params, const loadgen::Series& series, const DriverStats& st,
                           const ProcessCpu& cpu, bool interrupted);

}  // namespace exo::mcload
