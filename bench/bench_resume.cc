// bench_resume: time from "resume from a checkpoint" to the first sample, for a
// random sampler over n = 10,000,000 ids, resuming near the end of the epoch
// (9,900,000 committed) and near its start (100 committed), in one run. Resume is
// O(1) in the resume point, so the ratio should be ~1; both include generating the
// epoch's permutation, which dominates.
//
// Modes: `sampler` (restore a SamplerState in memory), `checkpoint` (write the rank
// file, load the directory, restore), `elastic` (8 ranks' files, each at the same
// fraction of its share, loaded as rank 0 of 4).
//
// Output: one JSON line per configuration on stdout, a table on stderr.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/sampler.h"
#include "transport/checkpoint/checkpoint.h"

namespace {

using brigade::actors::CommitState;
using brigade::actors::DistributedRandomSampler;
using brigade::actors::RandomOptions;
namespace fs = std::filesystem;

constexpr std::uint64_t kN = 10'000'000;
constexpr std::uint64_t kSeed = 2026;
constexpr int kRepeats = 7;  // the median is reported

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds from restoring `resume_at` committed samples to the first sample.
double time_to_first(const std::string& mode, std::uint64_t resume_at, const fs::path& dir) {
  fs::remove_all(dir);
  if (mode == "elastic") {
    for (std::uint32_t r = 0; r < 8; ++r) {
      DistributedRandomSampler s(kN, {.rank = r, .world_size = 8, .seed = kSeed});
      brigade::transport::write_checkpoint(dir, s.state({.watermark = resume_at / 8}, 1));
    }
  } else if (mode == "checkpoint") {
    DistributedRandomSampler s(kN, {.seed = kSeed});
    brigade::transport::write_checkpoint(dir, s.state({.watermark = resume_at}, 1));
  }
  const std::uint32_t world = mode == "elastic" ? 4 : 1;
  const double t0 = now();
  DistributedRandomSampler s(kN, {.rank = 0, .world_size = world, .seed = kSeed});
  if (mode == "sampler") {
    DistributedRandomSampler saved(kN, {.seed = kSeed});  // state() only, not generated
    s.restore(saved.state({.watermark = resume_at}, 1));
  } else {
    s.restore(
        brigade::transport::load_checkpoint(dir, 0, world, {.expected = s.fingerprint()}).state);
  }
  const auto first = s.next();
  const double seconds = now() - t0;
  if (!first)
    std::fprintf(stderr, "no sample after resuming at %llu\n",
                 static_cast<unsigned long long>(resume_at));
  return seconds;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  const fs::path dir =
      fs::temp_directory_path() / ("brigade-bench-resume-" + std::to_string(::getpid()));
  std::fprintf(stderr, "%-11s %10s %12s %10s\n", "mode", "resume_at", "first (ms)", "ratio");
  const std::uint64_t points[2] = {100, 9'900'000};
  for (const std::string mode : {"sampler", "checkpoint", "elastic"}) {
    std::vector<double> times[2];
    for (int rep = 0; rep < kRepeats; ++rep) {  // interleaved, so that load drifts hit both
      for (int k = 0; k < 2; ++k) times[k].push_back(time_to_first(mode, points[k], dir));
    }
    const double base = median(times[0]);
    for (int k = 0; k < 2; ++k) {
      const double t = median(times[k]);
      std::printf(
          "{\"bench\":\"resume\",\"mode\":\"%s\",\"n\":%llu,\"resume_at\":%llu,"
          "\"seconds_to_first_item\":%.6f,\"ratio_to_resume_at_100\":%.3f}\n",
          mode.c_str(), static_cast<unsigned long long>(kN),
          static_cast<unsigned long long>(points[k]), t, t / base);
      std::fprintf(stderr, "%-11s %10llu %12.1f %10.3f\n", mode.c_str(),
                   static_cast<unsigned long long>(points[k]), t * 1e3, t / base);
    }
  }
  fs::remove_all(dir);
  return 0;
}
