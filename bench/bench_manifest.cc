// bench_manifest: loading a manifest of n = 10,000,000 rows (launch/loader/manifest.h):
// generates it (CSV and JSON Lines; paths "shard-NNNN/NNNNNNNNN.jpg", class names of
// 1,000 classes, one metadata column), reads it once per format and reports the load
// rate and the heap the Dataset holds per sample beyond its path strings (malloc's
// figures before and after: mallinfo2, so the manifest's mapping and the load's
// temporaries, freed by then, do not count). Goals (issue 23): >= 1 M lines/s,
// <= 64 bytes per sample. `bench_manifest N` sets n.
//
// Output: one JSON line per format on stdout, a line of text on stderr each.

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "launch/loader/manifest.h"

namespace {

namespace fs = std::filesystem;
using brigade::launch::ManifestFormat;

std::size_t heap_in_use() {
  const auto m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

std::string path_of(std::uint64_t i) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "shard-%04llu/%09llu.jpg",
                static_cast<unsigned long long>(i / 10000), static_cast<unsigned long long>(i));
  return buffer;
}

void generate(const fs::path& file, ManifestFormat format, std::uint64_t n) {
  std::ofstream out(file);
  std::string line;
  if (format == ManifestFormat::csv) out << "path,label,width\n";
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto cls = "class" + std::to_string(i * 7919 % 1000);
    const auto width = std::to_string(200 + i % 400);
    if (format == ManifestFormat::csv) {
      line = path_of(i) + "," + cls + "," + width + "\n";
    } else {
      line = "{\"path\": \"" + path_of(i) + "\", \"label\": \"" + cls + "\", \"width\": " + width +
             "}\n";
    }
    out << line;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'000;
  const auto dir = fs::temp_directory_path() / ("bench_manifest_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const auto format : {ManifestFormat::csv, ManifestFormat::jsonl}) {
    const char* name = format == ManifestFormat::csv ? "csv" : "jsonl";
    const auto file = dir / (std::string("m.") + name);
    generate(file, format, n);
    const auto bytes = fs::file_size(file);
    const auto heap_before = heap_in_use();
    const auto t0 = std::chrono::steady_clock::now();
    const auto d = brigade::launch::read_manifest(file.string(), {.meta = {"width"}});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto held = heap_in_use() - heap_before;
    std::size_t path_bytes = 0, meta_bytes = 0;
    for (std::size_t i = 0; i < d.size(); ++i) {
      path_bytes += d.identity(i).size();
      meta_bytes += d.meta(i, 0).size();
    }
    const double per_sample =
        (static_cast<double>(held) - static_cast<double>(path_bytes)) / static_cast<double>(n);
    std::printf(
        "{\"bench\": \"manifest\", \"format\": \"%s\", \"rows\": %llu, \"file_bytes\": %llu, "
        "\"load_s\": %.3f, \"lines_per_s\": %.0f, \"held_bytes_per_sample_beyond_paths\": %.1f, "
        "\"meta_bytes_per_sample\": %.1f, \"classes\": %zu, \"labelled\": %s}\n",
        name, static_cast<unsigned long long>(n), static_cast<unsigned long long>(bytes), seconds,
        static_cast<double>(n) / seconds, per_sample,
        static_cast<double>(meta_bytes) / static_cast<double>(n), d.classes().size(),
        d.labelled() ? "true" : "false");
    std::fflush(stdout);
    std::fprintf(stderr,
                 "%s: %llu rows in %.2f s (%.2f M lines/s), %.1f bytes/sample held beyond the "
                 "paths (of which %.1f the metadata's text)\n",
                 name, static_cast<unsigned long long>(n), seconds,
                 static_cast<double>(n) / seconds / 1e6, per_sample,
                 static_cast<double>(meta_bytes) / static_cast<double>(n));
    fs::remove(file);
  }
  fs::remove_all(dir);
}
