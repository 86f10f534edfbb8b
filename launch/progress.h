#pragma once

// Progress of `brigade run` on stderr: on a terminal, one bar redrawn in place a few
// times a second (samples, percent, samples/s, ETA, failures); otherwise a plain log
// line through spdlog every few seconds.
//
// While a bar is shown, the default spdlog logger writes through a sink that erases
// the bar before each log line and redraws it after, so warnings from any thread
// (a corrupt file) never land in the middle of the bar; the logger's own sinks are
// restored by finish() (or the destructor).
//
// THREADING. update() and finish() from one thread; log lines from any thread.

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "launch/loader/job.h"

namespace brigade::launch {

class ProgressReporter {
 public:
  /// `bar`: draw a bar (stderr is a terminal and the user did not turn it off).
  explicit ProgressReporter(bool bar);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  /// Reports `p`; throttled to 4 redraws a second (a log line every 5 s without a bar).
  void update(const Progress& p);
  /// Ends the bar's line, so that later output starts on a fresh one.
  void finish();

  /// The bar's text for `p` (no carriage return), `width` columns of bar.
  static std::string format_bar(const Progress& p, int width = 30);

  struct Shared;  // what the log sink and the bar share (detail)

 private:
  bool bar_;
  double last_ = -1e9;
  std::shared_ptr<Shared> shared_;
  std::vector<std::shared_ptr<void>> saved_sinks_;  // the logger's sinks, while replaced
};

}  // namespace brigade::launch
