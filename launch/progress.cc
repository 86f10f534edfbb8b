#include "launch/progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

namespace brigade::launch {
namespace {

std::string clock(double seconds) {
  if (!(seconds >= 0) || seconds > 360000) return "--:--";
  const auto s = static_cast<long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02d}:{:02d}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{:02d}:{:02d}", s / 60, s % 60);
}

}  // namespace

std::string ProgressReporter::format_bar(const Progress& p, int width) {
  const double fraction = p.expected ? std::min(1.0, double(p.samples) / double(p.expected)) : 0;
  const int full = static_cast<int>(fraction * width);
  const double rate = p.seconds > 0 ? p.samples / p.seconds : 0;
  const double eta = rate > 0 && p.expected >= p.samples ? (p.expected - p.samples) / rate : -1;
  return fmt::format("[{}{}] {}/{} {:3.0f}% {:.0f} samples/s ETA {} failed {}",
                     std::string(full, '#'), std::string(width - full, '.'), p.samples, p.expected,
                     fraction * 100, rate, clock(eta), p.failed);
}

void ProgressReporter::update(const Progress& p) {
  const double interval = bar_ ? 0.25 : 5.0;
  if (p.seconds - last_ < interval) return;
  last_ = p.seconds;
  if (bar_) {
    std::fprintf(stderr, "\r%s\033[K", format_bar(p).c_str());
    std::fflush(stderr);
    drawn_ = true;
  } else if (p.seconds > 0) {
    spdlog::info("brigade: {}", format_bar(p, 0).substr(3));
  }
}

void ProgressReporter::finish() {
  if (drawn_) std::fputc('\n', stderr);
  drawn_ = false;
}

}  // namespace brigade::launch
