#pragma once

// Progress of `brigade run` on stderr: on a terminal, one bar redrawn in place a few
// times a second (samples, percent, samples/s, ETA, failures); otherwise a plain log
// line through spdlog every few seconds. Not thread-safe: one thread reports.

#include <cstdint>
#include <string>

#include "launch/job.h"

namespace brigade::launch {

class ProgressReporter {
 public:
  /// `bar`: draw a bar (stderr is a terminal and the user did not turn it off).
  explicit ProgressReporter(bool bar) : bar_(bar) {}
  ~ProgressReporter() { finish(); }
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  /// Reports `p`; throttled to 4 redraws a second (a log line every 5 s without a bar).
  void update(const Progress& p);
  /// Ends the bar's line, so that later output starts on a fresh one.
  void finish();

  /// The bar's text for `p` (no carriage return), `width` columns of bar.
  static std::string format_bar(const Progress& p, int width = 30);

 private:
  bool bar_;
  bool drawn_ = false;
  double last_ = -1e9;
};

}  // namespace brigade::launch
