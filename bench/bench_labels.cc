// bench_labels: what labels and mixing cost the pipeline, in one run (issue 23).
//
//   The same images (default: the demo set, 2,000 JPEGs in 10 class folders) through
//   `brigade run`'s job with the eval transform on --threads threads, page cache warm:
//     none    the folder listed without labels (list_folder)
//     labels  its class folders as labels (labels = folder: every batch carries them)
//     mix     two [[sources]], each the same labelled folder, weights 1:1 (every batch
//             also carries each sample's source; twice the draws per epoch)
//   Rounds alternate the three (after one warm-up run of each); each reports the median
//   rate of its rounds and its ratio to `none` (the goal for labels: >= 0.99), the
//   median of the per-round ratios, and the process's CPU time per sample (its ratio to
//   `none` too): on a machine shared with other work the wall-clock rate follows the
//   neighbours' load, the CPU a sample costs much less so.
//
// Output: one JSON line per configuration on stdout, a table on stderr.
//   bench_labels [--data DIR] [--threads N] [--rounds N]

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "launch/loader/demo_dataset.h"
#include "launch/loader/job.h"
#include "launch/loader/job_settings.h"
#include "launch/loader/sources.h"

namespace {

using namespace brigade;
using launch::RunConfig;

double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* no_env(const char*) { return nullptr; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Variant {
  const char* name;
  RunConfig config;
  std::vector<double> rates{};
  std::vector<double> cpu_ms{};  // CPU per sample
  std::size_t samples = 0;
};

// One job over `c`'s dataset (listing excluded): samples per second, and CPU ms per sample.
void run(Variant& v) {
  RunConfig c = v.config;
  launch::resolve(c, no_env);
  const auto d = launch::open_dataset(c, false);
  const double t0 = now(), cpu0 = cpu_now();
  const auto summary = launch::run_job(c, d, {});
  const double n = double(summary.counts.samples);
  v.samples = summary.counts.samples;
  v.rates.push_back(n / (now() - t0));
  v.cpu_ms.push_back((cpu_now() - cpu0) * 1e3 / n);
}

}  // namespace

int main(int argc, char** argv) {
  std::string data;
  int threads = 2, rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--data")) data = argv[i + 1];
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(3, std::atoi(argv[i + 1]));
  }
  if (data.empty()) data = launch::demo_folder(launch::MediaKind::image).string();
  RunConfig base;
  base.threads = threads;
  base.batch_size = 32;
  base.seed = 7;
  std::vector<Variant> variants{{"none", base}, {"labels", base}, {"mix", base}};
  variants[0].config.data = data;
  variants[1].config.data = data;
  variants[1].config.labels = launch::Labels::folder;
  for (const char* name : {"a", "b"}) {
    variants[2].config.sources.push_back(
        {.name = name, .weight = 1, .listing = {.data = data, .labels = launch::Labels::folder}});
  }
  for (auto& v : variants) {  // warm the page cache
    run(v);
    v.rates.clear();
    v.cpu_ms.clear();
  }
  for (int r = 0; r < rounds; ++r) {
    for (auto& v : variants) run(v);
  }
  const auto& none = variants[0];
  for (const auto& v : variants) {
    std::vector<double> pairs;
    for (int r = 0; r < rounds; ++r) pairs.push_back(v.rates[r] / none.rates[r]);
    std::printf(
        "{\"bench\":\"labels\",\"variant\":\"%s\",\"samples\":%zu,\"threads\":%d,"
        "\"transform\":\"eval\",\"rounds\":%d,\"per_s\":%.1f,\"none_per_s\":%.1f,"
        "\"ratio\":%.3f,\"pair_ratio_median\":%.3f,\"cpu_ms_per_sample\":%.3f,"
        "\"cpu_ratio\":%.3f}\n",
        v.name, v.samples, threads, rounds, median(v.rates), median(none.rates),
        median(v.rates) / median(none.rates), median(pairs), median(v.cpu_ms),
        median(v.cpu_ms) / median(none.cpu_ms));
    std::fprintf(stderr,
                 "%-7s %6zu samples  %8.1f/s  ratio to none %.3f (paired %.3f)  CPU %.3f "
                 "ms/sample (x%.3f)\n",
                 v.name, v.samples, median(v.rates), median(v.rates) / median(none.rates),
                 median(pairs), median(v.cpu_ms), median(v.cpu_ms) / median(none.cpu_ms));
  }
  return 0;
}
