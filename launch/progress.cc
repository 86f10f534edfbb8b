#include "launch/progress.h"

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

namespace brigade::launch {

struct ProgressReporter::Shared {
  std::mutex mutex;
  std::string bar;  // the text drawn, "" when none is on screen
};

namespace {

std::string clock(double seconds) {
  if (!(seconds >= 0) || seconds > 360000) return "--:--";
  const auto s = static_cast<long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02d}:{:02d}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{:02d}:{:02d}", s / 60, s % 60);
}

// Erases the bar, lets the logger's own sinks write the line, redraws the bar.
class BarAwareSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  BarAwareSink(std::vector<spdlog::sink_ptr> inner,
               std::shared_ptr<ProgressReporter::Shared> shared)
      : inner_(std::move(inner)), shared_(std::move(shared)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::lock_guard lock(shared_->mutex);
    if (!shared_->bar.empty()) std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    for (auto& s : inner_) {
      if (s->should_log(msg.level)) {
        s->log(msg);
        s->flush();
      }
    }
    if (!shared_->bar.empty()) std::fprintf(stderr, "%s", shared_->bar.c_str());
    std::fflush(stderr);
  }
  void flush_() override {
    for (auto& s : inner_) s->flush();
  }

 private:
  std::vector<spdlog::sink_ptr> inner_;
  std::shared_ptr<ProgressReporter::Shared> shared_;
};

}  // namespace

ProgressReporter::ProgressReporter(bool bar) : bar_(bar), shared_(std::make_shared<Shared>()) {
  auto logger = spdlog::default_logger();
  if (!bar_ || !logger) return;
  auto& sinks = logger->sinks();
  for (auto& s : sinks) saved_sinks_.push_back(s);
  auto wrapped = std::make_shared<BarAwareSink>(sinks, shared_);
  sinks.assign({wrapped});
}

ProgressReporter::~ProgressReporter() { finish(); }

std::string ProgressReporter::format_bar(const Progress& p, int width) {
  const auto done = p.samples + p.failed;  // samples consumed: delivered or failed
  const double fraction = p.expected ? std::min(1.0, double(done) / double(p.expected)) : 0;
  const int full = static_cast<int>(fraction * width);
  const double rate = p.seconds > 0 ? p.samples / p.seconds : 0;
  const double eta = rate > 0 && p.expected >= done ? (p.expected - done) / rate : -1;
  return fmt::format("[{}{}] {}/{} {:3.0f}% {:.0f} samples/s ETA {} failed {}",
                     std::string(full, '#'), std::string(width - full, '.'), p.samples, p.expected,
                     fraction * 100, rate, clock(eta), p.failed);
}

void ProgressReporter::update(const Progress& p) {
  const double interval = bar_ ? 0.25 : 5.0;
  if (p.seconds - last_ < interval) return;
  last_ = p.seconds;
  if (!bar_) {
    if (p.seconds > 0) spdlog::info("brigade: {}", format_bar(p, 0).substr(3));
    return;
  }
  std::lock_guard lock(shared_->mutex);
  shared_->bar = format_bar(p);
  std::fprintf(stderr, "\r%s\033[K", shared_->bar.c_str());
  std::fflush(stderr);
}

void ProgressReporter::finish() {
  {
    std::lock_guard lock(shared_->mutex);
    if (!shared_->bar.empty()) std::fputc('\n', stderr);
    shared_->bar.clear();
  }
  if (saved_sinks_.empty()) return;
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.clear();
  for (auto& s : saved_sinks_) sinks.push_back(std::static_pointer_cast<spdlog::sinks::sink>(s));
  saved_sinks_.clear();
}

}  // namespace brigade::launch
