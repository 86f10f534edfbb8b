#include "launch/process.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace brigade::launch {

double process_seconds() {
  // /proc/self/stat field 22 is the start time in clock ticks since boot.
  static const double start_since_boot = [] {
    std::ifstream stat("/proc/self/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    auto pos = text.rfind(')');
    std::istringstream rest(text.substr(pos + 2));
    std::string field;
    for (int i = 3; i <= 22; ++i) rest >> field;
    return std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }();
  std::ifstream uptime("/proc/uptime");
  double now_since_boot = 0;
  uptime >> now_since_boot;
  // /proc/uptime has 10 ms resolution: refine with a steady clock anchored at first use.
  static const auto anchor = std::chrono::steady_clock::now();
  static const double anchor_since_start = now_since_boot - start_since_boot;
  return anchor_since_start +
         std::chrono::duration<double>(std::chrono::steady_clock::now() - anchor).count();
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

}  // namespace brigade::launch
