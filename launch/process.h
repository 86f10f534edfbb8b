#pragma once

// Figures about this process, for the run summary. The run's figures start at the
// program's own start (mark_program_start() first thing in main), not at the process's
// creation: a wrapper that execs brigade (scripts/demo.sh) adds nothing, and work done
// before the job (generating the demo dataset) is excluded by taking a baseline.

namespace brigade::launch {

void mark_program_start();  // call first in main (later calls do nothing)
double program_seconds();   // wall time since mark_program_start()
double cpu_seconds();       // user + system CPU time of this process so far
/// Resets the peak resident set size that peak_rss_mb() reports (Linux's
/// /proc/self/clear_refs "5"); returns false where the kernel does not allow it.
bool reset_peak_rss();
double peak_rss_mb();  // peak resident set size since the last reset (VmHWM)

}  // namespace brigade::launch
