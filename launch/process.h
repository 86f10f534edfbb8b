#pragma once

// Figures about this process, for the run summary.

namespace brigade::launch {

double process_seconds();  // wall time since the process started
double cpu_seconds();      // user + system CPU time of this process so far
double peak_rss_mb();      // peak resident set size

}  // namespace brigade::launch
