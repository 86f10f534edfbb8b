// bench_shards: WebDataset tar shards against loose files, in one run (issue 23).
//
//   rate   The same images (default: the demo set, 2,000 JPEGs around 500x375) as loose
//          files and as 16 tar shards (GNU tar, sorted names), `brigade run`'s job with the
//          eval transform on --threads threads, page cache warm; rounds alternate and
//          the median rate of each is reported with the ratio shards / loose.
//   cold   The shards, evicted from the page cache before each run (posix_fadvise
//          POSIX_FADV_DONTNEED on each file): full-random vs block shuffle (window W), as
//          the whole job (decode included) and as the reads alone (the job's read stage:
//          8 io threads reading each sample's byte range in sampler order). Per sample:
//          file opens (each read opens its shard: 1), bytes the storage delivered
//          (/proc/self/io read_bytes: readahead included) and bytes read by the calls.
//   index  1,000 generated shards x 1,000 small members (500 samples: .jpg + .cls), the
//          index built cold (no cache, shards evicted) and warm (from the caches):
//          members/s, and the heap the Dataset holds per sample.
//
// Output: one JSON line per configuration on stdout, a table on stderr.
//   bench_shards [--mode rate|cold|index|all] [--data DIR] [--work DIR] [--threads N]
//                [--rounds N] [--window W]

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/sampler.h"
#include "launch/loader/demo_dataset.h"
#include "launch/loader/job.h"
#include "launch/loader/job_settings.h"
#include "launch/loader/shards.h"
#include "launch/loader/sources.h"
#include "media/source.h"

namespace {

namespace fs = std::filesystem;
using namespace brigade;
using launch::RunConfig;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* no_env(const char*) { return nullptr; }

struct Args {
  std::string mode = "all", data, work = "/tmp/brigade-bench-shards";
  int threads = 2, rounds = 3;
  std::uint64_t window = 2;
};

void evict(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// /proc/self/io: bytes the storage layer fetched, bytes read by the calls.
std::pair<std::uint64_t, std::uint64_t> proc_io() {
  std::ifstream in("/proc/self/io");
  std::string key;
  std::uint64_t v = 0, storage = 0, calls = 0;
  while (in >> key >> v) {
    if (key == "read_bytes:") storage = v;
    if (key == "rchar:") calls = v;
  }
  return {storage, calls};
}

// The image files under `dir` as the job lists them, and 16 shards of them in that order.
std::vector<std::string> make_shards(const std::string& dir, const fs::path& out, int count) {
  const auto d = launch::list_folder(dir, launch::MediaKind::image);
  fs::create_directories(out);
  std::vector<std::string> shards;
  const std::size_t per = (d.size() + count - 1) / count;
  for (int s = 0; s < count; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "train-%06d.tar", s);
    const auto shard = out / name;
    shards.push_back(shard.string());
    if (fs::exists(shard)) continue;
    const auto list = out / (std::string(name) + ".list");
    {
      std::ofstream l(list);
      for (std::size_t i = s * per; i < std::min(d.size(), (s + 1) * per); ++i)
        l << d.identity(i) << "\n";
    }
    const std::string cmd = "tar --format=gnu -cf '" + shard.string() + "' -C '" + dir +
                            "' --no-recursion -T '" + list.string() + "'";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("tar failed: " + cmd);
  }
  return shards;
}

RunConfig job_config(int threads) {
  RunConfig c;
  c.threads = threads;
  c.batch_size = 32;
  c.seed = 7;
  return c;
}

// Samples per second of one job over `c`'s dataset.
double job_rate(RunConfig c) {
  launch::resolve(c, no_env);
  const auto d = launch::open_dataset(c, false);
  const double t0 = now();
  const auto summary = launch::run_job(c, d, {});
  return double(summary.counts.samples) / (now() - t0);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void rate(const Args& a, const std::string& data) {
  const auto shards = make_shards(data, fs::path(a.work) / "rate", 16);
  RunConfig loose = job_config(a.threads), sharded = job_config(a.threads);
  loose.data = data;
  sharded.shards = shards;
  job_rate(loose);  // warm the page cache and the index cache
  job_rate(sharded);
  std::vector<double> l, s;
  for (int r = 0; r < a.rounds; ++r) {
    l.push_back(job_rate(loose));
    s.push_back(job_rate(sharded));
  }
  const auto n = launch::open_dataset(loose, false).size();
  // Each round's shards run against the loose run just before it: the steadier figure on
  // a machine whose load drifts.
  std::vector<double> pairs;
  for (std::size_t r = 0; r < l.size(); ++r) pairs.push_back(s[r] / l[r]);
  std::printf(
      "{\"bench\":\"shards\",\"mode\":\"rate\",\"cache\":\"warm\",\"samples\":%zu,\"shards\":16,"
      "\"threads\":%d,\"transform\":\"eval\",\"rounds\":%d,\"loose_per_s\":%.1f,"
      "\"shards_per_s\":%.1f,\"ratio\":%.3f,\"pair_ratio_median\":%.3f}\n",
      n, a.threads, a.rounds, median(l), median(s), median(s) / median(l), median(pairs));
  std::fprintf(stderr,
               "rate (warm, %d threads): loose %.1f/s  shards %.1f/s  ratio %.3f  (median of "
               "paired ratios %.3f)\n",
               a.threads, median(l), median(s), median(s) / median(l), median(pairs));
}

// The reads alone: 8 threads read the samples' ranges in the sampler's order.
double read_only(const launch::Dataset& d, actors::DistributedSampler& sampler) {
  std::vector<std::uint64_t> order;
  while (auto s = sampler.next()) order.push_back(s->value.id);
  std::atomic<std::size_t> next{0};
  const double t0 = now();
  std::vector<std::jthread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1)) < order.size();) {
        const auto l = d.location(order[i]);
        (void)media::read_file_range(l.path, l.offset, l.size);
      }
    });
  }
  threads.clear();
  return double(order.size()) / (now() - t0);
}

void cold(const Args& a, const std::string& data) {
  const auto shards = make_shards(data, fs::path(a.work) / "rate", 16);
  for (const bool reads_only : {true, false}) {
    for (const std::uint64_t window : {std::uint64_t(0), a.window}) {
      std::vector<double> rates, storage, calls;
      std::size_t n = 0;
      for (int r = 0; r < a.rounds; ++r) {
        RunConfig c = job_config(a.threads);
        c.shards = shards;
        c.shuffle_window = window;
        c.seed = 7 + r;
        launch::resolve(c, no_env);
        const auto d = launch::open_dataset(c, false);  // the index from its cache
        n = d.size();
        for (const auto& s : shards) evict(s);
        const auto before = proc_io();
        if (reads_only) {
          auto sampler = launch::make_sampler(c, d);
          rates.push_back(read_only(d, *sampler));
        } else {
          const double t0 = now();
          const auto summary = launch::run_job(c, d, {});
          rates.push_back(double(summary.counts.samples) / (now() - t0));
        }
        const auto after = proc_io();
        storage.push_back(double(after.first - before.first) / double(n));
        calls.push_back(double(after.second - before.second) / double(n));
      }
      const char* shuffle = window ? "blocks" : "random";
      std::printf(
          "{\"bench\":\"shards\",\"mode\":\"cold\",\"what\":\"%s\",\"shuffle\":\"%s\","
          "\"window\":%llu,\"samples\":%zu,\"shards\":16,\"threads\":%d,\"per_s\":%.1f,"
          "\"opens_per_sample\":1,\"storage_bytes_per_sample\":%.0f,"
          "\"read_bytes_per_sample\":%.0f}\n",
          reads_only ? "reads" : "job", shuffle, (unsigned long long)window, n, a.threads,
          median(rates), median(storage), median(calls));
      std::fprintf(stderr,
                   "cold %-5s %-6s W=%llu: %9.1f/s  storage %8.0f B/sample  calls %8.0f "
                   "B/sample\n",
                   reads_only ? "reads" : "job", shuffle, (unsigned long long)window, median(rates),
                   median(storage), median(calls));
    }
  }
}

// A ustar header for a regular file `name` (< 100 bytes) of `size` bytes.
void ustar_header(std::string& out, const std::string& name, std::size_t size) {
  char h[512] = {};
  std::memcpy(h, name.data(), name.size());
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 108, 8, "%07o", 0);
  std::snprintf(h + 116, 8, "%07o", 0);
  std::snprintf(h + 124, 12, "%011zo", size);
  std::snprintf(h + 136, 12, "%011o", 0);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  out.append(h, 512);
}

void index(const Args& a) {
  const auto dir = fs::path(a.work) / "index";
  fs::create_directories(dir);
  std::vector<std::string> shards;
  for (int s = 0; s < 1000; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "small-%06d.tar", s);
    shards.push_back((dir / name).string());
    if (fs::exists(shards.back())) continue;
    std::string tar;
    for (int k = 0; k < 500; ++k) {
      char key[32];
      std::snprintf(key, sizeof key, "%06d-%03d", s, k);
      const std::string jpg(100 + (k * 37) % 300, char('a' + k % 26)), cls = std::to_string(k % 10);
      for (const auto& [ext, bytes] : {std::pair{".jpg", jpg}, std::pair{".cls", cls}}) {
        ustar_header(tar, key + std::string(ext), bytes.size());
        tar += bytes;
        tar.append((512 - bytes.size() % 512) % 512, '\0');
      }
    }
    tar.append(1024, '\0');
    std::ofstream(shards.back(), std::ios::binary) << tar;
  }
  const auto cache = dir / "cache";
  for (const bool warm : {false, true}) {
    if (!warm) fs::remove_all(cache);
    for (const auto& s : shards) evict(s);
    // uordblks: the heap's chunks in use; hblkhd: the large ones malloc mmaps.
    const auto heap = [] { return mallinfo2().uordblks + mallinfo2().hblkhd; };
    const auto heap0 = heap();
    const double t0 = now();
    auto d = launch::open_shards(shards, {.cache_dir = cache.string()});
    const double seconds = now() - t0;
    const double per_sample = (double(heap()) - double(heap0)) / double(d.size());
    double strings = 0;
    for (std::size_t i = 0; i < d.size(); ++i) strings += double(d.identity(i).size());
    const double members = 1000.0 * 1000.0;
    std::printf(
        "{\"bench\":\"shards\",\"mode\":\"index\",\"cache\":\"%s\",\"shards\":1000,"
        "\"members\":%.0f,\"samples\":%zu,\"seconds\":%.3f,\"members_per_s\":%.0f,"
        "\"heap_bytes_per_sample\":%.1f,\"identity_bytes_per_sample\":%.1f}\n",
        warm ? "warm" : "cold", members, d.size(), seconds, members / seconds, per_sample,
        strings / double(d.size()));
    std::fprintf(stderr,
                 "index %s: %zu samples in %.2f s, %.0f members/s, %.1f heap B/sample (%.1f of "
                 "them identity strings)\n",
                 warm ? "warm" : "cold", d.size(), seconds, members / seconds, per_sample,
                 strings / double(d.size()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--mode")
      a.mode = v;
    else if (k == "--data")
      a.data = v;
    else if (k == "--work")
      a.work = v;
    else if (k == "--threads")
      a.threads = std::stoi(v);
    else if (k == "--rounds")
      a.rounds = std::stoi(v);
    else if (k == "--window")
      a.window = std::stoull(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    const std::string data =
        a.data.empty() ? launch::demo_folder(launch::MediaKind::image).string() : a.data;
    if (a.mode == "rate" || a.mode == "all") rate(a, data);
    if (a.mode == "cold" || a.mode == "all") cold(a, data);
    if (a.mode == "index" || a.mode == "all") index(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_shards: %s\n", e.what());
    return 1;
  }
  return 0;
}
