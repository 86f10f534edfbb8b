#pragma once

// The demo dataset `brigade run` uses when given no data: synthetic media made by
// media/'s generator (the project ships no binary media), generated once and cached.
//
// Layout: <cache>/images/<bucket>/img-NNNNN.jpg (about 2,000 JPEGs of varied sizes
// around 500x375, textured and noisy, quality 90, 4:2:0) and <cache>/videos/
// clip-NN.mp4 (32 two-second H.264 clips). A `.complete` marker, written last and
// atomically, tells a finished cache from one interrupted mid-way (regenerated).

#include <filesystem>
#include <string>

namespace brigade::launch {

struct DemoDatasetOptions {
  int images = 2000;
  int clips = 32;
  int threads = 0;  // 0: all cores
};

/// `$XDG_CACHE_HOME/brigade/demo`, else `~/.cache/brigade/demo`.
std::filesystem::path default_demo_dir();

/// Returns `dir`, generating the dataset there first unless it is complete.
/// Throws std::runtime_error naming the path on I/O errors.
std::filesystem::path ensure_demo_dataset(const std::filesystem::path& dir,
                                          const DemoDatasetOptions& options = {});

}  // namespace brigade::launch
